"""The concurrency probe read back (``analysis.predict.limits_probe``): the count streaming at
once, which limit two bursts show, malformed run.json entries, and what the fit takes from it."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.pipeline import analyze_run
from analysis.predict.facts import Burst, Estimate
from analysis.predict.fit import fit_capacity
from analysis.predict.limits_probe import classify, read_probe, streaming_at_once
from tests.support.report_fixtures import write_run_dir


def _waves(size: int, at_once: int, decode_ms: float = 100.0, gap_ms: float = 2.0) -> list:
    """``size`` requests through ``at_once`` slots in waves: each starts streaming ``gap_ms``
    after the wave before it ended."""
    streams, t = [], 0.0
    for start in range(0, size, at_once):
        first = t + gap_ms
        streams += [
            [first + 0.01 * k, first + decode_ms] for k in range(min(at_once, size - start))
        ]
        t = first + decode_ms
    return streams


#: case → (streams as [first token ms, end ms], the count held, whether requests queued)
AT_ONCE_CASES = {
    "none": ([], 0, False),
    "one request": ([[5.0, 50.0]], 1, False),
    "32 at once": (_waves(32, 32), 32, False),
    "8 slots, 4 waves": (_waves(32, 8), 8, True),
    "7 at a time, a last wave of 4": (_waves(32, 7), 7, True),
    "a new stream read a moment before the old one's end is no ninth slot": (
        [*_waves(16, 8)[:8], [101.9, 204.0], *[[102.5, 204.0]] * 7], 8, True),
    "a request that never streamed (end before first) is left out": (
        [*_waves(16, 8), [50.0, 40.0]], 8, True),
    "with send times: a request sent after the first end did not wait": (
        [[0.0, 2.0, 102.0]] * 8 + [[150.0, 152.0, 252.0]] * 8, 8, False),
    "with send times: one sent at once and served after the first end waited": (
        [[0.0, 2.0, 102.0]] * 8 + [[0.0, 104.0, 204.0]] * 8, 8, True),
    "staggered first tokens, all at once for most of the time": (
        [[2.0 * k, 100.0 + 2.0 * k] for k in range(32)], 32, False),
    # fresh #55: 64 slots, no budget, one thread of 32 starved past the first end on a busy machine
    "with send times: one straggler served after the first end is no limit": (
        [[0.0, 2.0, 102.0]] * 31 + [[0.0, 110.0, 210.0]], 31, False),
    "with send times: two served after the first end waited": (
        [[0.0, 2.0, 102.0]] * 30 + [[0.0, 110.0, 210.0]] * 2, 30, True),
}  # fmt: skip


@pytest.mark.parametrize(("streams", "count", "queued"), AT_ONCE_CASES.values(), ids=AT_ONCE_CASES)
def test_streaming_at_once_is_the_count_held_not_a_passing_overlap(streams, count, queued):
    assert streaming_at_once([tuple(s) for s in streams]) == (count, queued)


def _burst(prompt: float, at_once: int, queued: bool = True, answered: int = 32) -> Burst:
    return Burst(prompt, 16.0, answered, at_once, queued)


#: case → (the bursts at T and 2T, the limit, the slots read, the KV span (low, high) or None)
CLASSIFY_CASES = {
    "the same count at both: slots": (_burst(256, 8), _burst(512, 8), "slots", 8, None),
    "one fewer at twice the prompt is still slots": (_burst(256, 8), _burst(512, 7), "slots",
                                                      8, None),
    "fewer at the longer context: a KV budget, both spans": (
        _burst(256, 15), _burst(512, 7), "kv", None, (15 * 272, 8 * 528)),
    "spans that miss each other: the span over both": (
        _burst(256, 17), _burst(512, 7), "kv", None, (7 * 528, 18 * 272)),
    "slots at the prompt, KV at twice it": (_burst(256, 8), _burst(512, 6), "kv", 8,
                                             (6 * 528, 7 * 528)),
    "no queue at the prompt, a KV budget at twice it": (
        _burst(256, 32, queued=False), _burst(512, 27), "kv", None, (27 * 528, 28 * 528)),
    "no queue at either: no limit within the burst": (
        _burst(256, 32, queued=False), _burst(512, 32, queued=False), "unseen", None, None),
    "a queue only at the shorter prompt: the bursts disagree": (
        _burst(256, 8), _burst(512, 32, queued=False), "inconsistent", None, None),
}  # fmt: skip


@pytest.mark.parametrize(("short", "long", "limit", "slots", "span"), CLASSIFY_CASES.values(),
                         ids=CLASSIFY_CASES)  # fmt: skip
def test_two_bursts_say_which_limit_binds(short, long, limit, slots, span) -> None:
    reading = classify(short, long)
    assert (reading.limit, reading.slots) == (limit, slots)
    if span is None:
        assert reading.kv_tokens is None
    else:
        low, high = span
        assert reading.kv_tokens == Estimate((low + high) / 2, low, high)


def _raw(prompt: object = 256, streams: object = None, sent: object = 32) -> dict:
    waves = _waves(32, 8) if streams is None else streams
    return {"target_tokens": 256, "prompt_tokens": prompt, "completion_tokens": 16, "sent": sent,
            "failed": 0, "streams": waves}  # fmt: skip


def _info(*bursts: object) -> dict:
    return {"prompt_source": {"kind": "fixed", "concurrency_probes": list(bursts)}}


#: case → (run.json, the limit read or None)
READ_CASES = {
    "two bursts": (_info(_raw(), _raw(512)), "slots"),
    "no prompt source": ({}, None),
    "no probe": ({"prompt_source": {"kind": "fixed"}}, None),
    "one burst": (_info(_raw()), None),
    "not a list": ({"prompt_source": {"concurrency_probes": "8,8"}}, None),
    "half the burst failed: says nothing": (_info(_raw(), _raw(512, _waves(15, 8))), None),
    "malformed streams are skipped": (
        _info(_raw(streams=[*_waves(32, 8), [1, "x"], [None, 3], [1], "92", [math.inf, 1.0],
                            [0, None, 3], [0, 1, 2, 3]]),
              _raw(512)), "slots"),
    "no reported prompt: the target's": (_info(_raw(None), {**_raw(512), "target_tokens": 512,
                                                             "prompt_tokens": None}), "slots"),
    "the second burst no longer": (_info(_raw(), _raw(256)), None),
    "a burst not an object": (_info(_raw(), [512, 8]), None),
    "nothing sent": (_info(_raw(sent=0), _raw(512)), None),
}  # fmt: skip


@pytest.mark.parametrize(("info", "limit"), READ_CASES.values(), ids=READ_CASES)
def test_the_probe_is_read_from_run_json_and_malformed_bursts_say_nothing(info, limit) -> None:
    reading = read_probe(info)
    assert (reading.limit if reading else None) == limit


def _probe_info(short: int, long: int, queued_long: bool = True) -> dict:
    """run.json of a fixture run (128 + 32 tokens) with bursts at 128 and 256 prompt tokens."""
    long_streams = _waves(32, long) if queued_long else _waves(32, 32)
    return {
        "prompt_source": {
            "kind": "fixed", "input_tokens": 128, "output_tokens": 32,
            "concurrency_probes": [_raw(128, _waves(32, short)), _raw(256, long_streams)],
        }
    }  # fmt: skip


def test_without_metrics_the_probes_slot_limit_is_the_models(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", with_server_metrics=False, run_info=_probe_info(6, 6))
    fit = fit_capacity(analyze_run(run))
    assert (fit.slot_source, fit.params.slots) == ("probe", 6.0)
    # the probe held its burst at twice the prompt: no KV budget is assumed from the knee
    assert (fit.kv_source, fit.params.kv_tokens) == ("probe_unseen", None)
    assert fit.probe is not None and fit.probe.limit == "slots"


def test_without_metrics_the_probes_kv_budget_is_the_models(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", with_server_metrics=False, run_info=_probe_info(6, 3))
    fit = fit_capacity(analyze_run(run))
    # 6 of 144 tokens at 128, 3 of 272 at 256: a budget in [864, 1008) ∩ [816, 1088)
    assert fit.kv_source == "probe"
    assert fit.params.kv_tokens == Estimate(936.0, 864.0, 1008.0)


def _without_kv_gauge(run: Path) -> Path:
    metrics = pd.read_csv(run / "server_metrics.csv")
    metrics[metrics["metric"] != "vllm:kv_cache_usage_perc"].to_csv(
        run / "server_metrics.csv", index=False
    )
    return run


#: case → (the probe's counts at 128 and 256 prompt tokens, the bound, the model's slots)
BOUND_CASES = {
    "a KV budget that holds no more than the 6 running: KV bound the run": ((6, 3), "kv", None),
    "a KV budget that holds 10 of the run's: the slots bound it": ((10, 5), "slots", 6.0),
}  # fmt: skip


@pytest.mark.parametrize(("counts", "bound", "slots"), BOUND_CASES.values(), ids=BOUND_CASES)
def test_a_server_without_a_kv_gauge_is_kv_bound_where_the_probes_budget_says(
    tmp_path: Path, counts: tuple[int, int], bound: str, slots: float | None
) -> None:
    run = _without_kv_gauge(write_run_dir(tmp_path / "run", slots=6, run_info=_probe_info(*counts)))
    fit = fit_capacity(analyze_run(run))
    assert fit.kv_source == "probe" and fit.run_bound.knee_users == 8
    assert (fit.run_bound.bound, fit.params.slots) == (bound, slots)


def test_the_servers_gauges_come_before_the_probe(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", slots=6, run_info=_probe_info(9, 9))
    fit = fit_capacity(analyze_run(run))
    assert fit.kv_source == "kv_gauge" and fit.slot_source != "probe"
    assert fit.probe is not None and fit.probe.slots == 9  # kept, not used
