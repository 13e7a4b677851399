"""Imported results from vLLM's benchmark, GuideLLM and AIPerf give loadknee's own knee and rates.

The fixtures under ``tests/support/data/imports/`` are real outputs of the real tools run against
``loadknee sim --preset fast`` at 1, 2, 4, 8, 16 and 32 concurrent requests, plus loadknee's own
run of the same configuration (``tests/support/data/imports/README.md`` has the commands and
versions).
Each tool's files are imported, analysed, and compared with loadknee's run: the same knee and
max_concurrency, and per-stage output tok/s within 5 %. The table tests feed bad, foreign and
half-written files and check the one-line message or what was kept.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.importers.cli import import_files
from analysis.importers.model import ImportFormatError
from analysis.pipeline import analyze_run
from analysis.report.screen import NOT_JUDGED
from tests.support.paths import DATA

DATA = DATA / "imports"
SOURCES = {
    "vllm-bench": sorted((DATA / "vllm-bench").glob("vllm-c*.json")),
    "guidellm": [DATA / "guidellm" / "benchmarks.json"],
    "aiperf": sorted((DATA / "aiperf").glob("concurrency*")),
}
LEVELS = [1, 2, 4, 8, 16, 32]


def _rates(analysis) -> dict[int, float]:  # type: ignore[no-untyped-def]
    steps = analysis.summary[analysis.summary["kind"] == "step"]
    rates = dict(zip(steps["target_users"].astype(int), steps["output_tok_s"], strict=True))
    base = analysis.summary[analysis.summary["kind"] == "baseline"]
    if 1 not in rates and len(base):
        rates[1] = float(base["output_tok_s"].iloc[0])
    return rates


@pytest.fixture(scope="module")
def loadknee_own():  # type: ignore[no-untyped-def]
    return analyze_run(DATA / "loadknee")


@pytest.mark.parametrize("source", list(SOURCES))
def test_same_knee_and_rates_as_loadknee(source: str, tmp_path: Path, loadknee_own) -> None:  # type: ignore[no-untyped-def]
    _, run_dir = import_files(source, SOURCES[source], tmp_path / source)
    theirs = analyze_run(run_dir)
    assert list(theirs.summary["target_users"].astype(int)) == LEVELS
    assert theirs.summary["kind"].iloc[0] == "baseline"
    assert theirs.knee.knee_users == loadknee_own.knee.knee_users == 16
    ours_max = loadknee_own.recommendations.get("max_concurrency")
    assert theirs.recommendations.get("max_concurrency") == ours_max == 8
    ours, tool = _rates(loadknee_own), _rates(theirs)
    for users in LEVELS:
        assert tool[users] == pytest.approx(ours[users], rel=0.05), (source, users)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["source"]["tool"] == source
    assert all(len(f["sha256"]) == 64 for f in info["source"]["files"])
    assert info["not_judged"]


def _cut(src: Path, dest: Path, keep: float) -> Path:
    text = src.read_bytes()
    dest.write_bytes(text[: int(len(text) * keep)])
    return dest


#: per importer: files it must refuse (content, words its message must hold)
FOREIGN_FILES = {
    "guidellm": [
        ("", "empty file"),
        ("not json at all", "not JSON"),
        ('{"benchmarks": []}', "with keys benchmarks"),
        ("[1, 2]", "a JSON list"),
    ],
    "vllm-bench": [
        ('{"max_concurrency": 4, "duration": 1.0}', "--save-detailed"),
        ('{"metadata": {"guidellm_version": "0.8.1"}}', "without max_concurrency"),
    ],
}


@pytest.mark.parametrize(
    ("source", "content", "message"),
    [(source, *case) for source, cases in FOREIGN_FILES.items() for case in cases],
)
def test_foreign_file_one_clear_message(
    source: str, content: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "result.json"
    path.write_text(content)
    with pytest.raises(ImportFormatError) as err:
        import_files(source, [path], tmp_path / "out")
    text = str(err.value)
    assert str(path) in text and "expected" in text and message in text


def test_aiperf_folder_without_records(tmp_path: Path) -> None:
    folder = tmp_path / "concurrency4"
    folder.mkdir()
    shutil.copy(SOURCES["aiperf"][0] / "profile_export_aiperf.json", folder)
    with pytest.raises(ImportFormatError, match=r"no profile_export\.jsonl"):
        import_files("aiperf", [folder], tmp_path / "out")


def test_cut_guidellm_keeps_whole_benchmarks(tmp_path: Path) -> None:
    cut = _cut(SOURCES["guidellm"][0], tmp_path / "benchmarks.json", 0.7)
    imported, run_dir = import_files("guidellm", [cut], tmp_path / "out")
    kept = [lv.concurrency for lv in imported.levels]
    assert kept and kept == LEVELS[: len(kept)] and len(kept) < len(LEVELS)
    assert all(len(lv.requests) >= 32 for lv in imported.levels)
    # words are the product: the note a user reads on what a cut file lost
    assert any("dropped the cut one" in d for d in imported.dropped)
    assert json.loads((run_dir / "run.json").read_text())["source"]["dropped"]


def test_cut_aiperf_jsonl_keeps_whole_lines(tmp_path: Path) -> None:
    folder = tmp_path / "concurrency8"
    shutil.copytree(SOURCES["aiperf"][3], folder)
    lines = (folder / "profile_export.jsonl").read_text().splitlines()
    (folder / "profile_export.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:50])
    imported, _ = import_files("aiperf", [folder], tmp_path / "out")
    assert len(imported.levels[0].requests) == len(lines) - 1
    # words are the product: the note a user reads on what a cut file lost
    assert f"line(s) that are not whole records ({len(lines)})" in imported.dropped[0]


def test_cut_vllm_keeps_requests_with_every_field(tmp_path: Path) -> None:
    src = SOURCES["vllm-bench"][2]
    whole = json.loads(src.read_text())
    text = src.read_text()
    cut = tmp_path / "cut.json"  # cut inside start_times: the later lists are gone too
    cut.write_text(text[: text.index('"queue_times"') - 40])
    imported, _ = import_files("vllm-bench", [cut], tmp_path / "out")
    level = imported.levels[0]
    assert level.concurrency == whole["max_concurrency"]
    assert 0 < len(level.requests) < len(whole["latencies"])
    # words are the product: the note a user reads on what a cut file lost
    assert "kept the" in imported.dropped[0]


def test_no_text_reaches_the_run_directory(tmp_path: Path) -> None:
    _, run_dir = import_files("guidellm", SOURCES["guidellm"], tmp_path / "g")
    body = (run_dir / "requests.csv").read_text() + (run_dir / "run.json").read_text()
    assert "lorem" not in body and "ipsum" not in body


def test_the_commands_as_a_user_types_them(tmp_path: Path) -> None:
    """``loadknee import`` then ``loadknee analyze``: exit 0, the not-judged signals printed and
    in report.html; a foreign file is one line and exit 2."""
    import subprocess
    import sys

    loadknee = [sys.executable, "-m", "loadknee_locust"]
    run_dir = tmp_path / "gl"
    files = [str(f) for f in SOURCES["guidellm"]]
    done = subprocess.run([*loadknee, "import", "--from", "guidellm", "--out", str(run_dir),
                           *files], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    shown = subprocess.run([*loadknee, "analyze", str(run_dir)], capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert NOT_JUDGED in shown.stdout  # the screen's not-judged line
    missing = json.loads((run_dir / "run.json").read_text())["not_judged"]
    page = (run_dir / "report" / "report.html").read_text()
    section = page.split('<section id="not-judged">', 1)[1].split("</section>", 1)[0]
    assert section.count("<li>") == len(missing) > 0
    foreign = tmp_path / "foreign.json"
    foreign.write_text("not json at all")
    bad = subprocess.run([*loadknee, "import", "--from", "guidellm", "--out",
                          str(tmp_path / "bad"), str(foreign)], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "not JSON" in bad.stderr and len(bad.stderr.splitlines()) == 1
