"""`loadknee demo` end to end (the README's first command), on a shortened sweep: simulator →
real Locust sweep → analysis; exit 0, the record table, the knee where the simulator predicts it,
and the report on disk."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_the_whole_job(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "loadknee_locust", "demo", "--levels", "2,8,16",
        "--stage-seconds", "6", "--warmup-seconds", "1.5", "--cooldown-seconds", "1",
        "--baseline-requests", "5", "--out", str(tmp_path / "runs"),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "expect the knee at 16 users" in out  # the simulator's own prediction (8 slots)
    assert re.search(r"^users\s+reqs\s+secs\s+QPS\s+P50 s", out, re.MULTILINE)  # the table
    assert "[demo] sweep: loadknee run --host " in out  # a command the user has installed
    assert "Response time percentiles" not in out  # Locust's own tables stay behind --verbose
    deploy = [line for line in out.splitlines() if line.startswith("DEPLOY: ")]
    assert len(deploy) == 2  # the answer opens the analysis and closes the last screen
    assert deploy[0].startswith("DEPLOY: configure 8 concurrent requests, bound by the knee")
    # the grid shows the knee at 16; refinement between 8 and 16 pins it to the first level past
    # the 8 slots (9 when its three refine stages fit, higher when the budget ran out)
    knee = re.search(r"knee: knee at (\d+) users", out)
    assert knee and 9 <= int(knee.group(1)) <= 16, out[-2000:]
    assert "max_concurrency = 8" in out
    report = re.search(r"^report: (.+report\.html)$", out, re.MULTILINE)
    assert report and Path(report.group(1)).exists()


def test_demo_verbose_reaches_the_sweep() -> None:
    from loadknee_locust.commands.demo import build_parser, sweep_command

    quiet = sweep_command(build_parser().parse_args([]), "http://127.0.0.1:1")
    loud = sweep_command(build_parser().parse_args(["--verbose"]), "http://127.0.0.1:1")
    assert "--verbose" not in quiet and loud == [*quiet, "--verbose"]


def test_the_sweeps_progress_reaches_the_terminal_as_it_comes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The demo passes the sweep's lines through as they are printed, not after it ends."""
    import io
    import time

    from loadknee_locust.commands import demo

    seen: list[tuple[float, str]] = []

    class Terminal(io.StringIO):
        def write(self, text: str) -> int:
            seen.append((time.monotonic(), text))
            return len(text)

    monkeypatch.setattr(sys, "stdout", Terminal())
    child = "import time; print('stage 1', flush=True); time.sleep(1.0); print('run directory: x')"
    code, output = demo._run_streaming([sys.executable, "-c", child])
    assert (code, output) == (0, "stage 1\nrun directory: x\n")
    assert [text for _, text in seen] == ["stage 1\n", "run directory: x\n"]
    assert seen[1][0] - seen[0][0] >= 0.8  # the first line was shown a second before the end
