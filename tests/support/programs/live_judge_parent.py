"""Start a live judge child (``python -m analysis.live.judge``), print its pid, then wait.

Run in a child process by the test, which kills this parent with SIGKILL (no cleanup code runs
here) and checks that the judge child dies with it.
"""

from __future__ import annotations

import subprocess
import sys
import time

child = subprocess.Popen(
    [sys.executable, "-m", "analysis.live.judge"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
)
print(child.pid, flush=True)
time.sleep(600)
