"""A soak: one level held, the Locust process's memory and open files must stay flat.

The short form (30 s at 8 users, about a thousand requests on the simulator's ``fast`` preset)
runs with the suite; ``LOADKNEE_SOAK_S=280`` runs the full length by hand. The process is
sampled once a second through psutil (Locust's own dependency). After the first third
(imports, pools and buffers settle), the open file descriptors may not grow by more than a few
(a leaked socket per request would add hundreds), and the resident memory's growth per thousand
requests, from a least-squares line through the samples, must stay under what keeping one row
per request would cost (a row is about 2 KiB as a Python dict): a leak of request state shows as
a slope, a one-off allocation does not.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from loadknee_core.contract import REQUEST_COLUMNS
from tests.support.run_support import child_env, only_run_dir, read_csv

pytestmark = pytest.mark.slow

SOAK_S = float(os.environ.get("LOADKNEE_SOAK_S") or 30.0)
USERS = 8
#: resident growth allowed per 1000 requests: half of what keeping each row would cost
MAX_KIB_PER_1000 = 1000.0
MAX_FD_GROWTH = 4


def _locust_child(wrapper: psutil.Process, deadline: float) -> psutil.Process:
    while time.monotonic() < deadline:
        for child in wrapper.children(recursive=True):
            if "locust" in " ".join(child.cmdline()):
                return child
        time.sleep(0.1)
    raise AssertionError("the Locust process did not start")


def test_memory_and_open_files_stay_flat_over_a_held_level(sim_server, tmp_path: Path) -> None:
    sim = sim_server("fast")
    cmd = [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host", sim.url,
           "--levels", str(USERS), "--stage-seconds", str(SOAK_S), "--warmup-seconds", "1",
           "--cooldown-seconds", "0.5", "--baseline-requests", "0", "--no-refine",
           "--output-tokens", "16", "--input-tokens", "32", "--out", str(tmp_path),
           # tests memory and open files, not loadknee predict: skip the probe's ~2 s
           "--no-concurrency-probe"]  # fmt: skip
    wrapper = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env()
    )
    samples: list[tuple[float, int, int, int]] = []  # (t, rss bytes, fds, rows so far)
    try:
        locust = _locust_child(psutil.Process(wrapper.pid), time.monotonic() + 30)
        t0 = time.monotonic()
        while wrapper.poll() is None and time.monotonic() - t0 < SOAK_S + 60:
            try:
                rss, fds = locust.memory_info().rss, locust.num_fds()
            except psutil.NoSuchProcess:
                break
            rows = sum(1 for _ in (only_run_dir_or_none(tmp_path) or Path(os.devnull)).open())
            samples.append((time.monotonic() - t0, rss, fds, rows))
            time.sleep(1.0)
        out, _ = wrapper.communicate(timeout=120)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
    assert wrapper.returncode == 0, out[-3000:]
    served = read_csv(only_run_dir(tmp_path) / "requests.csv", REQUEST_COLUMNS)
    assert len(served) > 20 * SOAK_S, len(served)

    held = [s for s in samples if SOAK_S / 3 <= s[0] <= SOAK_S]
    assert len(held) >= SOAK_S / 2 * 0.6, f"only {len(held)} samples"
    _, rss, fds, rows = (np.array(col, dtype=float) for col in zip(*held, strict=True))
    kib_per_1000 = np.polyfit(rows, rss / 1024.0, 1)[0] * 1000.0
    print(f"soak {SOAK_S:.0f} s: {len(served)} requests, RSS {rss[0] / 2**20:.1f} → "
          f"{rss[-1] / 2**20:.1f} MiB ({kib_per_1000:+.0f} KiB per 1000 requests), "
          f"fds {int(fds.min())}–{int(fds.max())}")  # fmt: skip
    assert fds.max() - fds[0] <= MAX_FD_GROWTH, fds
    assert kib_per_1000 < MAX_KIB_PER_1000, (kib_per_1000, rss[0], rss[-1])


def only_run_dir_or_none(out: Path) -> Path | None:
    """requests.csv of the run once it exists (the count of its lines tracks rows written)."""
    found = list(out.glob("*/requests.csv"))
    return found[0] if found else None
