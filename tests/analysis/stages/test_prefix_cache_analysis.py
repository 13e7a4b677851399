"""The prefix-cache hit rate from counters (pure), traffic-class specs and the option checks."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.stages.prefix_cache import counters_found, stage_prefix_cache
from loadknee_core.traffic_classes import WeightedCycle, parse_classes
from loadknee_locust.client.sse import Usage
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.plugin.validate import option_problems


def _samples(metric_values: dict[str, list[float]], times: list[float]) -> pd.DataFrame:
    rows = [
        {"timestamp_unix_s": t, "endpoint": "http://h/metrics", "metric": m,
         "labels": 'model_name="x"', "value": v, "error": ""}
        for m, values in metric_values.items() for t, v in zip(times, values, strict=True)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def window_counts(frame: pd.DataFrame, start: float, end: float) -> dict[str, float]:
    """The counts over one stage's window ``[start, end]``."""
    windows = pd.DataFrame({"window_start": [start], "window_end": [end]})
    return stage_prefix_cache(frame, windows).iloc[0].to_dict()


def test_hit_rate_uses_only_the_scrapes_inside_the_window_and_survives_a_reset() -> None:
    times = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    frame = _samples(
        {
            "vllm:prefix_cache_queries_total": [0, 1000, 2000, 3000, 500, 1500],  # reset at 4
            "vllm:prefix_cache_hits_total": [0, 100, 900, 1700, 400, 1200],
        },
        times,
    )
    # inside [0.5, 3.5]: scrapes 1, 2, 3 only (the first 1000 queries hit 10 %: left out)
    inside = window_counts(frame, 0.5, 3.5)
    assert inside == {"prefix_cache_queries": 2000.0, "prefix_cache_hits": 1600.0,
                      "prefix_cache_hit_pct": 80.0}  # fmt: skip
    across = window_counts(frame, 2.5, 5.0)  # 3000 → 500 is a restart: 500 counted from zero
    assert across["prefix_cache_queries"] == 500 + 1000
    assert across["prefix_cache_hits"] == 400 + 800
    one_scrape = window_counts(frame, 1.5, 2.5)["prefix_cache_hit_pct"]
    assert math.isnan(one_scrape)  # one scrape inside: not measured, never a guess


def test_sglang_names_and_no_counters() -> None:
    frame = _samples(
        {"sglang:prompt_tokens_total": [0, 100, 200], "sglang:cached_tokens_total": [0, 50, 100]},
        [0.0, 1.0, 2.0],
    )
    found = counters_found(frame)
    assert found is not None and found.server == "sglang"
    assert (found.queries, found.hits) == (
        "sglang:prompt_tokens_total",
        "sglang:cached_tokens_total",
    )
    assert window_counts(frame, 0.0, 2.0)["prefix_cache_hit_pct"] == 50.0
    none = _samples({"vllm:num_requests_running": [1, 2, 3]}, [0.0, 1.0, 2.0])
    assert counters_found(none) is None
    windows = pd.DataFrame({"window_start": [0.0], "window_end": [2.0]}, index=[1])
    assert stage_prefix_cache(none, windows)["prefix_cache_hit_pct"].isna().all()


def test_class_spec_and_weighted_cycle() -> None:
    classes = parse_classes(
        "chat:70:128:8:ttft_p95_ms=500 summ:30:512:32:e2e_p95_ms=9000+ttft_p95_ms=2000"
    )
    assert [c.name for c in classes] == ["chat", "summ"] and classes[1].slos == (
        "e2e_p95_ms=9000", "ttft_p95_ms=2000"
    )  # fmt: skip
    cycle = WeightedCycle(classes)
    picks = [cycle.next().name for _ in range(1000)]
    for n in range(10, 1000, 37):  # every prefix of the sequence follows the weights within one
        assert abs(picks[:n].count("chat") - 0.7 * n) < 1.0
    for bad in ("chat:70:128", "chat:0:1:1 b:1:1:1", "chat:1:1:1", "a:1:1:1 a:1:1:1"):
        with pytest.raises(ValueError, match="--llm-classes"):
            parse_classes(bad)


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"turns": 0}, "--llm-turns must be >= 1"),
        ({"turns": 2, "batch_size": 4}, "needs --llm-batch-size 1"),
        ({"think_time": "soon"}, "--llm-think-time"),
        ({"classes": "a:1:10:5:ttft_p95=5 b:1:10:5"}, "class a"),
        ({"classes": "a:1:10:5 b:1:10:5", "turns": 2}, "cannot be combined"),
        ({"classes": "a:1:10:5 b:1:100:5", "shared_prefix_tokens": 50}, "class a's input"),
    ],
)
def test_option_problems_for_turns_and_classes(overrides: dict, words: str) -> None:
    import dataclasses

    options = dataclasses.replace(LlmOptions(), **overrides)
    assert any(words in p for p in option_problems(options)), option_problems(options)


def test_usage_cached_tokens_are_read_where_servers_put_them() -> None:
    from loadknee_locust.client.sse import extract_usage

    vllm = {"usage": {"prompt_tokens": 9, "completion_tokens": 2,
                      "prompt_tokens_details": {"cached_tokens": 8}}}  # fmt: skip
    assert extract_usage(vllm) == Usage(9, 2, 8)
    assert extract_usage({"usage": {"prompt_tokens": 9, "completion_tokens": 2}}) == Usage(9, 2)
    llama = {"timings": {"prompt_n": 3, "predicted_n": 4, "cache_n": 6}}
    assert extract_usage(llama) == Usage(3, 4, 6)
    both = {"usage": {"prompt_tokens": 9, "completion_tokens": 4}, **llama}
    assert extract_usage(both) == Usage(9, 4, 6)


def test_compare_kind_reads_the_servers_prefix_caching_label() -> None:
    from types import SimpleNamespace

    from analysis.compare.kind import RunSide, detect_kind, server_prefix_caching
    from analysis.model import KneeResult

    def side(label: str, on: str) -> RunSide:
        metrics = pd.DataFrame([{
            "timestamp_unix_s": 1.0, "endpoint": "e", "metric": "vllm:cache_config_info",
            "labels": f'block_size="16",enable_prefix_caching="{on}"', "value": 1.0, "error": "",
        }])  # fmt: skip
        summary = pd.DataFrame({"kind": ["step"], "target_users": [1], "batch_size": [1]})
        knee = KneeResult(
            stages=(), knee_stage=None, knee_users=None, max_concurrency=None,
            red_line_stage=None, red_line_users=None, base_capacity=None, summary="",
        )  # fmt: skip
        run = SimpleNamespace(server_metrics=metrics)
        return RunSide(label, summary, knee, {}, run=run)  # type: ignore[arg-type]

    off, on = side("off", "False"), side("on", "True")
    assert server_prefix_caching(on) == "true"
    assert detect_kind([off, on]) == "prefix-cache"
    assert detect_kind([on, side("on2", "True")]) == "config"
