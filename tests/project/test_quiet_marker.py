"""A ``quiet`` test runs alone under pytest-xdist: no test of another worker overlaps it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

TIMED = """
import time
from pathlib import Path

import pytest

LOG = Path({log!r})


def _log(name: str, start: float) -> None:
    with LOG.open("a") as fh:
        fh.write(f"{{name}} {{start}} {{time.time()}}\\n")
"""
QUIET = """
@pytest.mark.quiet
def test_quiet() -> None:
    start = time.time()
    time.sleep(1.0)
    _log("quiet", start)
"""
BUSY = """
@pytest.mark.parametrize("n", range(8))
def test_busy(n: int) -> None:
    start = time.time()
    time.sleep(0.3)
    _log(f"busy{{n}}", start)
"""


@pytest.mark.slow
def test_no_other_worker_runs_beside_a_quiet_test(tmp_path: Path) -> None:
    log = tmp_path / "intervals.txt"
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    quiet: runs alone\n")
    (tmp_path / "test_b_busy.py").write_text(TIMED.format(log=str(log)) + BUSY.format())
    (tmp_path / "test_a_quiet.py").write_text(TIMED.format(log=str(log)) + QUIET.format())
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-n", "2", "--dist", "loadfile", "-c", str(tmp_path / "pytest.ini"), "--rootdir",
         str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    spans = {}
    for line in log.read_text().splitlines():
        name, start, end = line.split()
        spans[name] = (float(start), float(end))
    assert len(spans) == 9, spans
    q_start, q_end = spans.pop("quiet")
    overlapping = [n for n, (s, e) in spans.items() if s < q_end and e > q_start]
    assert not overlapping, (overlapping, spans, (q_start, q_end))
