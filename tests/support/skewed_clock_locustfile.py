"""TEST-ONLY locustfile: the probe user, in a process whose wall clock is shifted on purpose.

``LK_TEST_CLOCK_SKEW_S=2`` makes ``time.time()`` in this process read 2 s ahead, as a worker on
a host with a wrong clock would (``time.time`` is looked up at call time everywhere that stamps a
row or a clock message). It stands in for a second machine in the multi-host tests; nothing
outside ``tests/`` reads the variable.
"""

from __future__ import annotations

import os
import time

_SKEW_S = float(os.environ.get("LK_TEST_CLOCK_SKEW_S") or 0.0)
if _SKEW_S:
    _real_time = time.time

    def _skewed_time() -> float:
        return _real_time() + _SKEW_S

    time.time = _skewed_time

from run_probe_locustfile import KneeShape, ProbeUser  # noqa: E402, F401  (same directory)
