"""Telemetry beside the requests: GPU (NVML / DCGM), server ``/metrics`` and client CPU → CSV.

Importing this package imports neither gevent nor pynvml: ``analysis`` reuses its pure modules
(:mod:`~loadknee_core.promtext`, :mod:`~loadknee_core.dcgm`). The
sampler, which needs a gevent hub, is loaded on first use of its name.
"""

from __future__ import annotations

from loadknee_locust.lazy import exports

#: public name → module that defines it (imported lazily, on attribute access)
__getattr__, __all__ = exports(
    __name__,
    {
        "TelemetrySampler": "loadknee_locust.telemetry.sampler",
        "TelemetryConfig": "loadknee_locust.telemetry.sampler",
        "register_worker_usage": "loadknee_locust.telemetry.client",
    },
)
