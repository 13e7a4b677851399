"""The web UI's end-of-run report (loadknee_locust/sweep/childjobs.FinalReport): the real
``loadknee analyze`` child over a real run directory, as the web UI starts it when a sweep ends.

A run that cannot tell its capacity (exit 3: here the rows of the stages below its knee are
gone, as a busy machine's late load generator also gives) still has its report, which says why:
the web UI must link it, not say "No report (failed)" (a fresh CI run beside a CPU hog did)."""

from __future__ import annotations

import shutil
from pathlib import Path

from loadknee_locust.sweep.childjobs import FinalReport
from loadknee_locust.webui.liveview import end_links

RUN = Path(__file__).parents[2] / "support" / "data" / "imports" / "loadknee"  # knee at 16


def _copy(tmp_path: Path, drop_stages: tuple[int, ...] = ()) -> Path:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    lines = (run / "requests.csv").read_bytes().splitlines(keepends=True)
    stage_col = lines[0].split(b",").index(b"stage")
    kept = [lines[0]] + [
        ln for ln in lines[1:] if int(float(ln.split(b",")[stage_col])) not in drop_stages
    ]
    (run / "requests.csv").write_bytes(b"".join(kept))
    return run


class _Run:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir


def _finish(run_dir: Path) -> FinalReport:
    report = FinalReport()
    report.start(run_dir)
    assert report.state == "running"
    report._job.join(timeout=300)
    return report


def test_a_run_that_cannot_tell_still_links_its_report(tmp_path: Path) -> None:
    run_dir = _copy(tmp_path, drop_stages=(1, 2, 3, 4))
    report = _finish(run_dir)
    assert (report.state, report.cannot_tell) == ("done", True)
    assert "class='lk-report'" in end_links(_Run(run_dir), report)  # type: ignore[arg-type]


def test_an_answered_run_links_its_report(tmp_path: Path) -> None:
    run_dir = _copy(tmp_path)
    report = _finish(run_dir)
    assert (report.state, report.cannot_tell) == ("done", False)
    assert "class='lk-report'" in end_links(_Run(run_dir), report)  # type: ignore[arg-type]
