"""Broken data gives an answer from the judged stages only, or "cannot tell" and exit 3.

A requests.csv cut mid-line (a killed sweep, a full disk, a copy in progress), a stage's rows
deleted, an empty measured window: a stage with no rows (or rows cut short) is never the answer
and never "the tested range"; with nothing judged, or nothing judged below the first limit, the
analysis cannot tell, exits 3, recommends nothing and writes no cluster file.

Two tables: :func:`row_coverage` on small hand-made frames (which stage is faulted, and how), and
the whole analysis on a copy of a real ``loadknee`` run directory (the simulator, 8 slots: knee at
16 users, deploy 8) damaged each way, through ``analyze_run`` and the real CLI.
"""

from __future__ import annotations

import csv
import html
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from analysis.cli import main as analyze_main
from analysis.model import RowFault
from analysis.pipeline import analyze_run
from analysis.report.screen import uncited
from analysis.report.standing import cannot_tell_text
from analysis.stages.coverage import row_coverage
from tests.support.paths import REPO

#: a real run directory of `loadknee run` on the simulator (8 slots), in the repository
REAL_RUN = REPO / "tests" / "support" / "data" / "imports" / "loadknee"
#: its stages: stage number → users (0 is the baseline)
USERS = {1: 1, 2: 2, 3: 4, 4: 8, 5: 16, 6: 32}
CLUSTER_FILES = ("keda-scaledobject.yaml", "hpa.yaml", "alerts.rules.yaml")

# --- row_coverage on hand-made frames -----------------------------------------------------------


def _stage(stage: int, users: int, t: float, *, kind: str = "step", measure_s: float = 10.0):
    return {
        "stage": stage, "kind": kind, "target_users": users, "batch_size": 1,
        "start_unix_s": t, "warmup_end_unix_s": t + 1.0, "measure_end_unix_s": t + 1.0 + measure_s,
        "end_unix_s": t + 13.0, "stop_reason": "duration",
    }  # fmt: skip


def _closed_loop(stage: int, users: int, t: float, *, until: float, e2e_s: float = 0.5) -> list:
    """Each user back to back from ``t`` to the window's close at ``t + 11`` (the request running
    then finishes after it); rows kept only when they end by ``until`` (the file's cut)."""
    rows = []
    for user in range(users):
        s = t + 0.1 * (user + 1)
        while s < t + 11.0:
            phase = "warmup" if s < t + 1.0 else "measure"
            if s + e2e_s <= until:
                rows.append({"stage": stage, "phase": phase, "start_unix_s": s,
                             "end_unix_s": s + e2e_s, "e2e_ms": e2e_s * 1000})  # fmt: skip
            s += e2e_s
    return rows


def _coverage(stages: list, rows: list, cut: tuple[str, ...] = ()) -> dict[int, RowFault]:
    requests = pd.DataFrame(
        rows, columns=["stage", "phase", "start_unix_s", "end_unix_s", "e2e_ms"]
    )
    measured = requests[requests["phase"] == "measure"]
    found = row_coverage(pd.DataFrame(stages), requests, measured, cut_files=cut)
    return {f.stage: f.kind for f in found.faults}


END = 1e9  # no cut

CUT = ("requests.csv",)  # the file's last line was cut mid-row


def _two_stages(
    first_until: float | None, second_until: float | None, first_measure_s: float = 10.0
) -> tuple[list, list]:
    """Stage 1 (2 users from 0 s) and stage 2 (4 users from 14 s), each stage's rows kept when
    they end by its ``until`` (None: the stage has no rows at all)."""
    stages = [_stage(1, 2, 0, measure_s=first_measure_s), _stage(2, 4, 14)]
    rows = [] if first_until is None else _closed_loop(1, 2, 0, until=first_until)
    rows += [] if second_until is None else _closed_loop(2, 4, 14, until=second_until)
    return stages, rows


#: case → (stage 1's rows until, stage 2's, stage 1's measured seconds, cut files, the faults)
COVERAGE_CASES: dict[
    str, tuple[float | None, float | None, float, tuple[str, ...], dict[int, RowFault]]
] = {
    "every row there": (END, END, 10.0, (), {}),
    "file ends before the last stage opens": (END, None, 10.0, (), {2: "not_measured"}),
    "a stage's rows deleted, the file goes on": (None, END, 10.0, (), {1: "no_rows"}),
    "file cut mid-row halfway through the last window": (END, 20.0, 10.0, CUT, {2: "rows_cut"}),
    "no completion in the last window's last seconds, no cut: sparse arrivals": (
        END, 20.0, 10.0, (), {},
    ),
    "an empty measured window": (END, END, 0.0, (), {1: "empty_window"}),
    "file ends while the requests running at the close still ran": (
        11.15, None, 10.0, (), {1: "rows_cut", 2: "not_measured"},
    ),
    "file ends after every request running at the close was recorded": (
        11.6, None, 10.0, (), {2: "not_measured"},
    ),
    "a run stopped in its last stage keeps its rows, cut last line or not": (
        END, 24.7, 10.0, CUT, {},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", COVERAGE_CASES)
def test_row_coverage_names_each_stage_the_rows_do_not_cover(case: str) -> None:
    first_until, second_until, first_measure_s, cut, expected = COVERAGE_CASES[case]
    stages, rows = _two_stages(first_until, second_until, first_measure_s)
    assert _coverage(stages, rows, cut) == expected


def test_requests_that_outlast_a_short_window_are_not_missing_rows() -> None:
    """A stage whose requests (3 s) outlast its window (1 s): every row recorded, none inside
    the window. Its rows are not missing (it is judged as too few usable requests); the same
    stage with its rows deleted is."""
    stages = [_stage(1, 2, 0, measure_s=1.0), _stage(2, 4, 14)]
    long_rows = [
        {"stage": 1, "phase": "warmup", "start_unix_s": s, "end_unix_s": s + 3.0, "e2e_ms": 3000}
        for s in (0.2, 0.4, 3.2, 3.4, 6.2, 6.4, 9.2, 9.4)
    ]
    later = _closed_loop(2, 4, 14, until=END)
    assert _coverage(stages, long_rows + later) == {}
    assert _coverage(stages, later) == {1: "no_rows"}
    # the last stage of a run: both users' requests running at the close recorded, or one lost
    last = [_stage(1, 2, 0, measure_s=1.0)]
    assert _coverage(last, long_rows[:2]) == {}
    assert _coverage(last, long_rows[:1]) == {1: "no_rows"}


def test_rows_of_a_stage_stages_csv_lacks_are_named() -> None:
    rows = _closed_loop(1, 2, 0, until=END) + _closed_loop(7, 2, 14, until=END)
    requests = pd.DataFrame(rows)
    found = row_coverage(pd.DataFrame([_stage(1, 2, 0)]), requests, requests, cut_files=["x"])
    assert found.faults == () and found.unlisted_stages == (7,) and found.cut_files == ("x",)


# --- the whole analysis on a damaged copy of a real run -----------------------------------------


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(REAL_RUN, run)
    return run


def _lines(run: Path) -> list[bytes]:
    return (run / "requests.csv").read_bytes().splitlines(keepends=True)


def _cut_at(stage: int, phase: str | None = None) -> Callable[[Path], None]:
    """Cut requests.csv mid-line at the first row (in file order) of ``stage`` (and ``phase``;
    this run measured its levels from their first request: no warm-up rows)."""

    def damage(run: Path) -> None:
        lines, kept = _lines(run), []
        for line in lines:
            cells = line.decode().split(",")
            if len(kept) and cells[1] == str(stage) and cells[2] in (phase or cells[2]):
                kept.append(line[: len(line) // 2])  # half a row, no newline
                break
            kept.append(line)
        (run / "requests.csv").write_bytes(b"".join(kept))

    return damage


def _delete(*stages: int) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        lines = _lines(run)
        kept = [lines[0]] + [ln for ln in lines[1:] if int(ln.split(b",")[1]) not in stages]
        (run / "requests.csv").write_bytes(b"".join(kept))

    return damage


def _empty_window(stage: int) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        with (run / "stages.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            if int(row["stage"]) == stage:
                row["measure_end_unix_s"] = row["warmup_end_unix_s"]
        with (run / "stages.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    return damage


def _cut_last_line(run: Path) -> None:
    lines = _lines(run)
    (run / "requests.csv").write_bytes(b"".join(lines[:-1]) + lines[-1][:30])


#: damage → (exit code, deploy figure or None, standing kind, users not judged)
ANALYSIS_CASES: dict[str, tuple[Callable[[Path], None], int, int | None, str, tuple[int, ...]]] = {
    "untouched": (lambda run: None, 0, 8, "answer", ()),
    "cut last line only": (_cut_last_line, 0, 8, "answer", ()),
    "cut mid-line in the 32-user window": (_cut_at(6, "measure"), 0, 8, "partial", (32,)),
    "cut mid-line before the 16-user window": (_cut_at(5), 0, 8, "partial", (16, 32)),
    "cut so only 1-2 users have rows": (_cut_at(3), 0, 2, "partial", (4, 8, 16, 32)),
    "the 8-user stage's rows deleted": (_delete(4), 0, 4, "partial", (8,)),
    "empty measured window at 8 users": (_empty_window(4), 0, 4, "partial", (8,)),
    "cut mid-line in the baseline": (_cut_at(0, "baseline"), 3, None, "cannot_tell",
                                     (1, 2, 4, 8, 16, 32)),
    "rows below the knee deleted": (_delete(1, 2, 3, 4), 3, None, "cannot_tell", (1, 2, 4, 8)),
}  # fmt: skip


@pytest.mark.parametrize("case", ANALYSIS_CASES)
def test_broken_data_answers_from_judged_stages_or_cannot_tell(case: str, tmp_path: Path) -> None:
    damage, _code, deploy, kind, unjudged = ANALYSIS_CASES[case]
    run = _copy(tmp_path)
    damage(run)
    analysis = analyze_run(run)
    standing = analysis.standing
    assert (standing.kind, standing.unjudged) == (kind, unjudged)
    recs = analysis.recommendations
    assert (recs.deploy.users if recs.deploy else None) == deploy
    # never a figure from a stage that was not judged, nor above the last judged one
    rows = dict(zip(analysis.summary["target_users"], analysis.summary["requests"], strict=False))
    for figure in (deploy, analysis.knee.max_concurrency, recs.get("base_capacity")):
        assert figure is None or (figure not in unjudged and rows[figure] > 0)
    if standing.cannot_tell:
        assert recs.items == () and recs.server_flags == ()
        assert "deploy_concurrency" not in analysis.recommendations_yaml


@pytest.mark.parametrize(
    "case", ["cut mid-line before the 16-user window", "cut mid-line in the baseline"]
)
def test_the_cli_exit_code_and_files(case: str, tmp_path: Path) -> None:
    damage, code, deploy, kind, _ = ANALYSIS_CASES[case]
    run = _copy(tmp_path)
    report = run / "report"
    report.mkdir()
    for name in CLUSTER_FILES:  # an earlier analysis's files: stale beside "cannot tell"
        (report / name).write_text("stale\n")
    damage(run)
    assert analyze_main([str(run), "--quiet"]) == code
    knee = json.loads((report / "knee.json").read_text())
    assert knee["standing"]["kind"] == kind
    answer = (knee["recommendations"] or {}).get("deploy")
    assert (answer or {}).get("users") == deploy
    written = {
        name: (report / name).read_text() for name in CLUSTER_FILES if (report / name).exists()
    }
    if code == 3:
        assert written == {}
        assert not list((report / "llm-d").glob("*.yaml"))
        # the page says it cannot tell, in the screen's words, where its why line stands
        judged = analyze_run(run)
        said = html.escape(cannot_tell_text(judged.standing, judged.knee), quote=True)
        assert f"<b>Why:</b> {said}</p>" in (report / "report.html").read_text()
        # no capacity stands anywhere, and record.md leads with the same words
        assert knee["recommendations"]["cannot_tell"] is True
        assert knee["answer"]["capacity"] is None and knee["answer"]["deploy_concurrency"] is None
        record = (report / "record.md").read_text()
        assert record.split("\n")[2] == "**cannot tell**: " + cannot_tell_text(
            judged.standing, judged.knee
        ).removeprefix("cannot tell: ")
    else:
        assert set(written) == set(CLUSTER_FILES)
        assert "stale" not in "".join(written.values())


def test_the_screen_says_cannot_tell_and_no_deploy_line(tmp_path: Path, capsys) -> None:
    run = _copy(tmp_path)
    _cut_at(0, "baseline")(run)
    assert analyze_main([str(run), "--quiet", "--emit", "none"]) == 3
    out, err = capsys.readouterr()
    judged = analyze_run(run)
    assert judged.standing.cannot_tell
    said = cannot_tell_text(judged.standing, judged.knee)  # its words: the golden screens
    assert " ".join(out.split()).startswith(" ".join(uncited(said).split()))
    assert "DEPLOY" not in out
    assert said in err
