"""The curve replay's plan and prompt source, pure: the in-flight curve per replay second, the
windows over the scales, and each logged record taken once, split across workers."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest

from loadknee_core.traces import TraceRecord
from loadknee_locust.curve.plan import CurvePlan, LengthIndex, PlanParams, build_plan, parse_scales
from loadknee_locust.curve.source import CurveSource
from tests.support.synth import calibrated_synth


def _records(n: int, gap: float, duration: float | None, t0: float = 1000.0) -> list[TraceRecord]:
    return [TraceRecord(i + 1, t0 + i * gap, duration, 10 + i, 5) for i in range(n)]


def test_the_curve_is_the_time_weighted_mean_in_flight_per_replay_second() -> None:
    # a request every 1 s lasting 3 s: 3 in flight in steady state; 10 log s per replay second
    plan, index = build_plan(_records(60, 1.0, 3.0), PlanParams(time_scale=10, window_s=2))
    assert len(plan.curve) == 7  # 62 s of log
    assert plan.curve[0] == pytest.approx((1 + 2 + 3 * 8) / 10)  # the ramp in the first bin
    assert plan.curve[2:5] == pytest.approx((3.0, 3.0, 3.0))
    assert sum(plan.curve) * 10 == pytest.approx(60 * 3.0)  # every request-second counted once
    assert [w.bins for w in plan.windows] == [2, 2, 2, 1]  # the last window is shorter
    assert [w.target_users for w in plan.windows] == [3, 3, 3, 1]
    assert len(index) == 60 and plan.duration_source == "logged"


def test_scales_replay_every_window_once_each() -> None:
    plan, _ = build_plan(_records(60, 1.0, 3.0), PlanParams(10, 2, (1.0, 2.0)))
    assert [w.scale for w in plan.windows] == [1.0] * 4 + [2.0] * 4
    assert [w.index for w in plan.windows] == list(range(8))
    assert plan.users_at(5, 0.5) == 6 and plan.users_at(1, 1.7) == 3
    assert plan.pass_of(3) == 0 and plan.pass_of(4) == 1
    assert plan.log_time(5, 1.5) == pytest.approx(plan.windows[5].log_start_s + 15)


def test_a_log_without_durations_needs_a_latency() -> None:
    with pytest.raises(ValueError, match="--llm-curve-latency-seconds"):
        build_plan(_records(10, 1.0, None), PlanParams())
    plan, _ = build_plan(_records(10, 1.0, None), PlanParams(1, 1, latency_s=2.0))
    assert plan.duration_source == "latency" and max(plan.curve) == pytest.approx(2.0)


@pytest.mark.parametrize("text", ["", "1,x", "0", "-1,2", "nan"])
def test_bad_scales_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--llm-curve-scales"):
        parse_scales(text)


def test_bad_params_are_refused() -> None:
    with pytest.raises(ValueError, match="time-scale"):
        PlanParams(time_scale=0)
    with pytest.raises(ValueError, match="window"):
        PlanParams(window_s=1.5)


def _source(
    plan: CurvePlan, index: LengthIndex, worker: int, workers: int, stage: list | None
) -> CurveSource:
    return CurveSource(
        calibrated_synth(), plan, index, clock=lambda: stage[0] if stage else None,
        input_tokens=7, output_tokens=3, worker=worker, workers=workers,
    )  # fmt: skip


def test_workers_take_disjoint_records_near_the_replayed_time() -> None:
    plan, index = build_plan(_records(200, 1.0, 3.0), PlanParams(time_scale=10, window_s=5))
    stage = [(1, 100.0)]  # window 1, announced at unix 100
    sources = [_source(plan, index, k, 2, stage) for k in range(2)]
    taken: list[int] = []
    for now in (100.0, 100.5, 101.0):
        for s in sources:
            t = s.replayed_time(now)
            i = s.take(t)
            assert index.starts[i] >= t and index.starts[i] - t < 10  # around its time
            taken.append(i)
    assert len(set(taken)) == len(taken)  # no record sent twice, across the two workers
    assert {i % 2 for i in taken[0::2]} == {0} and {i % 2 for i in taken[1::2]} == {1}
    assert all(s.reused == 0 for s in sources)


def test_prompts_have_the_logged_lengths_and_no_text_in_info() -> None:
    plan, index = build_plan(_records(20, 1.0, 3.0), PlanParams(time_scale=10, window_s=1))
    src = _source(plan, index, 0, 1, None)  # before any stage
    prompt = src.next_prompt("chat")
    assert (prompt.target_input_tokens, prompt.target_output_tokens) == (10, 5)
    info = src.info()
    assert info["kind"] == "curve" and info["records_sent"] == 1
    assert prompt.text is not None and prompt.text not in str(info)


def test_records_run_out_then_the_nearest_is_reused_and_counted() -> None:
    plan, index = build_plan(_records(3, 1.0, 1.0), PlanParams(time_scale=1, window_s=1))
    src = _source(plan, index, 0, 1, [(0, 0.0)])
    got = [src.take(1000.0) for _ in range(5)]
    assert got[:3] == [0, 1, 2] and src.reused == 2 and src.sent == 3


def test_a_new_scale_replays_the_log_afresh() -> None:
    plan, index = build_plan(_records(20, 1.0, 1.0), PlanParams(1, 10, (1.0, 2.0)))
    stage = [(1, 0.0)]
    src = _source(plan, index, 0, 1, stage)
    src.take(src.replayed_time(0.0))
    stage[0] = (2, 0.0)  # the first window of scale 2: back at the log's start
    assert src.take(src.replayed_time(0.0)) == 0


def test_the_live_track_holds_the_logs_curve_beside_the_measured_count() -> None:
    from loadknee_locust.curve.live import InflightTrack
    from loadknee_locust.webui.liveview import curve_chart

    plan, _ = build_plan(_records(60, 1.0, 3.0), PlanParams(10, 2, (1.0, 2.0)))
    track = InflightTrack(plan, 500.0)
    assert len(track.target) == 14 and track.target[9] == pytest.approx(2 * plan.curve[2])
    for k in range(6):  # two requests in flight over seconds 0..6, each 1 s long
        track.add(500.0 + k, 501.0 + k)
        track.add(500.0 + k, 501.0 + k)
    track.add(499.0, 500.5)  # began before the replay's first second: its part inside counts
    target, measured = track.points()
    assert len(target) == 14
    # shown up to the latest end (6 s) less the longest request (1.5 s): 4 full seconds
    assert [m for _, m in measured] == pytest.approx([2.5, 2, 2, 2])
    svg = curve_chart(track)
    assert 'data-chart="curve"' in svg
    # two lines, the log's curve (first) and the measured count, each point where it should be
    drawn: dict[str, list[tuple[float, float]]] = {}
    for name, x, y in re.findall(r'data-series="([^"]*)" data-x="([^"]*)" data-y="([^"]*)"', svg):
        drawn.setdefault(name, []).append((float(x), float(y)))
    curve, count = drawn.values()
    assert _flat(curve) == pytest.approx(_flat(p for p in target if p[1] is not None), rel=1e-5)
    assert _flat(count) == pytest.approx(_flat(measured), rel=1e-5)


def _flat(points: Iterable[tuple[float, float | None]]) -> list[float | None]:
    return [v for point in points for v in point]


def test_the_options_are_checked_before_any_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from loadknee_locust.plugin.options import LlmOptions
    from loadknee_locust.plugin.validate import option_problems

    log = tmp_path / "prod.jsonl"
    log.write_text('{"timestamp": 1, "duration_s": 1}\n')
    assert option_problems(LlmOptions(replay_curve=str(log))) == []
    problems = option_problems(
        LlmOptions(replay_curve=str(tmp_path / "none.jsonl"), time_scale=0, prompt_log=str(log))
    )
    text = " | ".join(problems)
    # words are the product: the message a user reads for bad input
    assert "--llm-time-scale" in text and "cannot read" in text and "--llm-prompt-log" in text
    both = " | ".join(option_problems(LlmOptions(replay_curve=str(log), rates="1,2")))
    assert "--llm-replay-curve" in both and "--llm-rates" in both  # the two that conflict
