"""Map DCGM-exporter samples (one scrape) to ``gpu.csv`` rows, one per GPU.

Pure stdlib: the sampler calls it on every scrape (one without ``DCGM_FI_*`` fields: no row) and
``analysis.inputs.server_metrics.gpu_from_dcgm`` calls it on raw samples read back from
``server_metrics.csv``, so both sides give the same numbers.

Mapping (dcgm-exporter field → gpu.csv column):

======================================  ==================  =====================================
field                                   column              conversion
======================================  ==================  =====================================
``DCGM_FI_DEV_FB_USED`` (MiB)           memory_used_mib     as is
``DCGM_FI_DEV_FB_TOTAL`` (MiB)          memory_total_mib    as is, when exported
``DCGM_FI_DEV_FB_FREE`` (+ ``_RESERVED``) memory_total_mib  used + free (+ reserved) otherwise
``DCGM_FI_DEV_GPU_UTIL`` (0–100)        gpu_util_pct        as is
``DCGM_FI_PROF_SM_ACTIVE`` (0–1)        sm_util_pct         × 100
``DCGM_FI_PROF_DRAM_ACTIVE`` (0–1)      mem_bw_util_pct     × 100 (preferred: it is a ratio of
                                                            bandwidth)
``DCGM_FI_DEV_MEM_COPY_UTIL`` (0–100)   mem_bw_util_pct     as is, when DRAM_ACTIVE is absent
``DCGM_FI_DEV_POWER_USAGE`` (W)         power_w             as is
======================================  ==================  =====================================

GPUs are told apart by the ``gpu`` label (dcgm-exporter's index), then ``Hostname`` when one
scrape covers several hosts; a sample without a ``gpu`` label counts as GPU 0. A GPU whose
fields are all missing yields no row; a field that is missing is ``None`` (empty), never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from loadknee_core.promtext import Sample

FB_USED: Final = "DCGM_FI_DEV_FB_USED"
FB_FREE: Final = "DCGM_FI_DEV_FB_FREE"
FB_TOTAL: Final = "DCGM_FI_DEV_FB_TOTAL"
FB_RESERVED: Final = "DCGM_FI_DEV_FB_RESERVED"
GPU_UTIL: Final = "DCGM_FI_DEV_GPU_UTIL"
SM_ACTIVE: Final = "DCGM_FI_PROF_SM_ACTIVE"
DRAM_ACTIVE: Final = "DCGM_FI_PROF_DRAM_ACTIVE"
MEM_COPY_UTIL: Final = "DCGM_FI_DEV_MEM_COPY_UTIL"
POWER_USAGE: Final = "DCGM_FI_DEV_POWER_USAGE"

#: every field this module reads
FIELDS: Final[frozenset[str]] = frozenset(
    {
        FB_USED,
        FB_FREE,
        FB_TOTAL,
        FB_RESERVED,
        GPU_UTIL,
        SM_ACTIVE,
        DRAM_ACTIVE,
        MEM_COPY_UTIL,
        POWER_USAGE,
    }
)


def gpu_rows(samples: Iterable[Sample], timestamp_unix_s: float) -> list[dict[str, Any]]:
    """One ``gpu.csv`` row (source ``dcgm``) per GPU found in one scrape's samples."""
    per_gpu: dict[tuple[str, str], dict[str, float]] = {}
    for s in samples:
        if s.metric not in FIELDS:
            continue
        key = (s.labels.get("Hostname", ""), s.labels.get("gpu", "0"))
        per_gpu.setdefault(key, {})[s.metric] = s.value
    rows = []
    for (_host, gpu), fields in sorted(per_gpu.items(), key=_gpu_sort_key):
        rows.append(
            {
                "timestamp_unix_s": timestamp_unix_s,
                "gpu_index": int(gpu) if gpu.isdigit() else gpu,
                "source": "dcgm",
                "memory_used_mib": fields.get(FB_USED),
                "memory_total_mib": _total_mib(fields),
                "gpu_util_pct": fields.get(GPU_UTIL),
                "sm_util_pct": _times100(fields.get(SM_ACTIVE)),
                "mem_bw_util_pct": (
                    _times100(fields[DRAM_ACTIVE])
                    if DRAM_ACTIVE in fields
                    else fields.get(MEM_COPY_UTIL)
                ),
                "power_w": fields.get(POWER_USAGE),
            }
        )
    return rows


def _total_mib(fields: dict[str, float]) -> float | None:
    if FB_TOTAL in fields:
        return fields[FB_TOTAL]
    if FB_USED in fields and FB_FREE in fields:
        return fields[FB_USED] + fields[FB_FREE] + fields.get(FB_RESERVED, 0.0)
    return None


def _times100(value: float | None) -> float | None:
    return None if value is None else value * 100.0


def _gpu_sort_key(item: tuple[tuple[str, str], Any]) -> tuple[str, int, str]:
    host, gpu = item[0]
    return (host, int(gpu) if gpu.isdigit() else 1 << 30, gpu)
