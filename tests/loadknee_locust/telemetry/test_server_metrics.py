"""server_metrics: known server names → canonical timeline; raw DCGM → gpu.csv rows."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from analysis.inputs.server_metrics import (
    CANONICAL_METRICS,
    TIMELINE_COLUMNS,
    canonical_timeline,
    gpu_from_dcgm,
)
from loadknee_core import dcgm
from loadknee_core.contract import GPU_COLUMNS, SERVER_METRIC_COLUMNS
from loadknee_core.promtext import parse_lines
from tests.support.kept_out import imports_brought


def frame(
    rows: list[tuple[float, str, str, float]], endpoint: str = "http://s/metrics"
) -> pd.DataFrame:
    """(timestamp, metric, labels, value) rows as server_metrics.csv would read back."""
    data = [
        {"timestamp_unix_s": t, "endpoint": endpoint, "metric": m, "labels": lab, "value": v}
        for t, m, lab, v in rows
    ]
    return pd.DataFrame(data, columns=list(SERVER_METRIC_COLUMNS))


@pytest.mark.parametrize(
    ("server", "rows", "expected"),
    [
        (
            "vllm",
            [
                ("vllm:kv_cache_usage_perc", "", 0.42),
                ("vllm:num_requests_running", "", 7),
                ("vllm:num_requests_waiting", "", 3),
                ("vllm:num_preemptions_total", "", 2),
            ],
            (42.0, 7, 3, 2),
        ),
        ("vllm-old", [("vllm:gpu_cache_usage_perc", "", 0.9)], (90.0, None, None, None)),
        (
            "sglang",
            [
                ("sglang:token_usage", "", 0.5),
                ("sglang:num_running_reqs", "", 4),
                ("sglang:num_queue_reqs", "", 1),
            ],
            (50.0, 4, 1, None),
        ),
        ("tgi", [("tgi_batch_current_size", "", 6), ("tgi_queue_size", "", 2)], (None, 6, 2, None)),
        (
            "llama.cpp",
            [("llamacpp:requests_processing", "", 2), ("llamacpp:requests_deferred", "", 5)],
            (None, 2, 5, None),
        ),
    ],
)
def test_each_server_maps_to_the_canonical_columns(
    server: str, rows: list[tuple[str, str, float]], expected: tuple[float | None, ...]
) -> None:
    timeline = canonical_timeline(frame([(10.0, m, lab, v) for m, lab, v in rows]))
    assert list(timeline.columns) == list(TIMELINE_COLUMNS)
    assert len(timeline) == 1
    got = tuple(timeline.iloc[0][list(TIMELINE_COLUMNS[2:])])
    for g, e in zip(got, expected, strict=True):
        assert (pd.isna(g) and e is None) or g == pytest.approx(e), (server, got)


def test_label_sets_summed_for_counts_max_for_kv() -> None:
    rows = [
        (1.0, "vllm:num_requests_running", 'engine="0",model_name="a"', 3),
        (1.0, "vllm:num_requests_running", 'engine="1",model_name="a"', 4),
        (1.0, "vllm:kv_cache_usage_perc", 'engine="0"', 0.2),
        (1.0, "vllm:kv_cache_usage_perc", 'engine="1"', 0.6),
        (2.0, "vllm:num_requests_running", 'engine="0"', 1),
    ]
    timeline = canonical_timeline(frame(rows))
    assert list(timeline["timestamp_unix_s"]) == [1.0, 2.0]
    assert list(timeline["requests_running"]) == [7, 1]
    assert timeline["kv_cache_usage_pct"].iloc[0] == pytest.approx(60.0)
    assert pd.isna(timeline["kv_cache_usage_pct"].iloc[1])


def test_current_name_wins_over_the_old_one() -> None:
    rows = [(1.0, "vllm:gpu_cache_usage_perc", "", 0.1), (1.0, "vllm:kv_cache_usage_perc", "", 0.3)]
    assert canonical_timeline(frame(rows))["kv_cache_usage_pct"].iloc[0] == pytest.approx(30.0)


def test_error_rows_unknown_names_and_endpoints_kept_apart() -> None:
    df = pd.concat(
        [
            frame([(1.0, "vllm:num_requests_running", "", 2), (1.0, "other_metric", "", 9)]),
            frame([(1.0, "DCGM_FI_DEV_GPU_UTIL", 'gpu="0"', 50)], endpoint="http://g:9400/metrics"),
            pd.DataFrame(
                [{"timestamp_unix_s": 1.5, "endpoint": "http://s/metrics", "error": "HTTP 500"}]
            ),
            frame([(2.0, "vllm:num_requests_running", "", 5)], endpoint="http://s2/metrics"),
        ],
        ignore_index=True,
    )
    timeline = canonical_timeline(df)
    assert list(zip(timeline["endpoint"], timeline["requests_running"], strict=True)) == [
        ("http://s/metrics", 2),
        ("http://s2/metrics", 5),
    ]
    empty = canonical_timeline(df.iloc[2:3])
    assert empty.empty and list(empty.columns) == list(TIMELINE_COLUMNS)


def test_mapping_table_is_consistent() -> None:
    names = [m.metric for m in CANONICAL_METRICS]
    assert len(names) == len(set(names))
    assert all(m.column in TIMELINE_COLUMNS for m in CANONICAL_METRICS)


DCGM_TEXT = """\
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",Hostname="h"} 40000
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a",Hostname="h"} 41920
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="h"} 55
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",Hostname="h"} 0.5
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",Hostname="h"} 100
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-b",Hostname="h"} 81820
vllm:num_requests_running 1
"""


def test_gpu_from_dcgm_matches_the_sampler_mapping() -> None:
    from loadknee_core.promtext import render_labels

    samples = parse_lines(io.StringIO(DCGM_TEXT)).samples
    df = pd.concat(
        [
            frame([(t, s.metric, render_labels(s.labels), s.value) for s in samples])
            for t in (1.0, 1.5)
        ],
        ignore_index=True,
    )
    gpu = gpu_from_dcgm(df)
    assert list(gpu.columns) == list(GPU_COLUMNS)
    expected = pd.DataFrame(dcgm.gpu_rows(samples, 1.0) + dcgm.gpu_rows(samples, 1.5))
    assert list(gpu["gpu_index"]) == [0, 1, 0, 1]
    for column in ("memory_used_mib", "memory_total_mib", "gpu_util_pct", "sm_util_pct"):
        pd.testing.assert_series_equal(
            gpu[column], expected[column].astype("float64"), check_names=False
        )
    assert gpu_from_dcgm(frame([(1.0, "vllm:num_requests_running", "", 1)])).empty


def test_importing_the_analysis_side_imports_no_gevent_nor_locust() -> None:
    modules = "analysis.inputs.server_metrics,analysis.inputs.nvsmi"
    assert imports_brought(modules, "gevent,locust,pynvml") == []


def test_tensor_parallel_ranks_are_one_scheduler_data_parallel_ranks_add_up() -> None:
    rows = [  # SGLang, dp 2 × tp 2: each tp rank repeats its scheduler's numbers
        *(
            (1.0, "sglang:num_running_reqs", f'dp_rank="{dp}",tp_rank="{tp}"', running)
            for dp, running in ((0, 4), (1, 6))
            for tp in (0, 1)
        ),
        (1.0, "sglang:token_usage", 'dp_rank="0",tp_rank="0"', 0.3),
        (1.0, "sglang:token_usage", 'dp_rank="1",tp_rank="1"', 0.8),
    ]
    timeline = canonical_timeline(frame(rows))
    assert timeline["requests_running"].iloc[0] == 10  # 4 + 6, not 20
    assert timeline["kv_cache_usage_pct"].iloc[0] == pytest.approx(80.0)
