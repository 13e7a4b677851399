"""TEST-ONLY locustfile: the probe user with a shape whose live judgement raises after stage 0.

It stands in for any bug that escapes the shape's ``tick``: Locust only logs such an error and a
headless run used to wait forever with no users. The run must end by itself instead.
"""

from __future__ import annotations

from run_probe_locustfile import ProbeUser  # noqa: F401  (same directory)

from loadknee_locust.plugin import shape  # the module, so only BrokenShape is a shape here


class BrokenShape(shape.KneeShape):
    def _decide(self, stage: int):  # type: ignore[no-untyped-def]
        raise RuntimeError(f"simulated scheduler bug after stage {stage}")
