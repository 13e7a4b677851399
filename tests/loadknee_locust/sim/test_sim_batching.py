"""The pure continuous-batching scheduler: admission, slots, KV budget, preemption, costs."""

from __future__ import annotations

import pytest

from loadknee_locust.sim.batching import Scheduler, Sequence
from loadknee_locust.sim.params import SimParams, preset


def make(params: SimParams, *lengths: tuple[int, int]) -> tuple[Scheduler, list[Sequence]]:
    sched = Scheduler(params)
    seqs = [Sequence(i, prompt, stop, "length") for i, (prompt, stop) in enumerate(lengths)]
    sched.add(seqs)
    return sched, seqs


def test_idle_step_is_none() -> None:
    assert Scheduler(preset("fast")).step() is None


def test_fifo_admission_up_to_slots_and_step_cost() -> None:
    params = preset("fast", max_num_seqs=2, prefill_ms_per_token=0.1)
    sched, seqs = make(params, (10, 3), (20, 3), (30, 3))
    first = sched.step()
    assert first is not None
    assert first.admitted == (seqs[0], seqs[1]) and list(sched.waiting) == [seqs[2]]
    assert first.prefill_tokens == 30
    assert first.duration_s == pytest.approx((10.0 + 0.5 * 2 + 0.1 * 30) / 1000)
    assert [s.generated for s in seqs] == [1, 1, 0]
    second = sched.step()
    assert second is not None and second.admitted == () and second.prefill_tokens == 0
    assert second.duration_s == pytest.approx((10.0 + 0.5 * 2) / 1000)
    third = sched.step()
    assert third is not None and third.finished == (seqs[0], seqs[1])
    assert [s.generated for s in seqs] == [3, 3, 0]
    fourth = sched.step()  # the freed slot is refilled on the next step
    assert fourth is not None and fourth.admitted == (seqs[2],)


def test_the_running_gauge_counts_a_sequence_until_its_last_step_ends() -> None:
    """The step that emits a sequence's last token still computes it: a scrape during that step
    counts it as running (vLLM's gauge counts the scheduled batch), and it is gone after."""
    sched, seqs = make(preset("fast", max_num_seqs=2), (10, 2), (10, 4), (10, 4))
    assert sched.in_batch == 0
    assert sched.step() is not None and sched.in_batch == 2
    last = sched.step()  # seqs[0] emits its 2nd and last token in this step
    assert last is not None and last.finished == (seqs[0],)
    assert len(sched.running) == 1 and sched.in_batch == 2
    refill = sched.step()  # the next step refills the slot: two in the batch again
    assert refill is not None and refill.admitted == (seqs[2],) and sched.in_batch == 2
    while sched.step() is not None:
        pass
    assert sched.in_batch == 0  # idle: nothing computing


def test_kv_accounting_returns_to_zero() -> None:
    sched, seqs = make(preset("fast"), (100, 5), (50, 2))
    peaks = []
    while sched.has_work:
        result = sched.step()
        assert result is not None
        peaks.append(result.peak_kv_tokens)
    assert peaks[0] == 100 + 1 + 50 + 1
    assert sched.kv_used == 0 and sched.running == []
    assert [s.generated for s in seqs] == [5, 2]


def test_head_that_does_not_fit_blocks_the_queue() -> None:
    params = preset("fast", kv_cache_tokens=300, max_model_len=300)
    sched, seqs = make(params, (150, 10), (200, 10), (5, 10))
    result = sched.step()
    assert result is not None and result.admitted == (seqs[0],)  # 200 does not fit; 5 must wait
    assert list(sched.waiting) == [seqs[1], seqs[2]]


def test_preemption_moves_newest_to_the_front() -> None:
    params = preset("fast", kv_cache_tokens=60, max_model_len=60)
    sched, seqs = make(params, (20, 40), (20, 40), (20, 40))
    first = sched.step()
    assert first is not None and first.admitted == (seqs[0], seqs[1])  # 3rd: 40 + 2 + 21 > 60
    preempted = []
    while not preempted:
        result = sched.step()
        assert result is not None
        preempted = list(result.preempted)
    assert preempted == [seqs[1]]  # newest running goes back
    assert sched.waiting[0] is seqs[1]  # ahead of seqs[2]
    assert seqs[1].preemptions == 1 and seqs[1].kv_tokens == 0
    assert sched.preemptions_total == 1
    generated_before = seqs[1].generated
    while seqs[1].admissions < 2:
        assert sched.step() is not None
    # recompute: readmitted with prompt + already generated tokens, keeps its progress
    assert seqs[1].generated == generated_before + 1
    while sched.has_work:
        assert sched.step() is not None
    assert [s.generated for s in seqs] == [40, 40, 40]
    assert sched.kv_used == 0


def test_chunked_prefill_spreads_a_long_prompt_over_steps() -> None:
    params = preset("fast", max_num_batched_tokens=1000, prefill_ms_per_token=0.01)
    sched, seqs = make(params, (10, 50), (2500, 5))
    durations, emitted = [], []
    for _ in range(4):
        result = sched.step()
        assert result is not None
        durations.append(result.duration_s * 1000)
        emitted.append([s.seq_id for s in result.emitted])
    # step 1: seq 0 prefills 10 and seq 1 takes 990; then 999, then the last 511
    assert [s.generated for s in seqs] == [4, 2]
    assert emitted == [[0], [0], [0, 1], [0, 1]]
    assert durations[0] == pytest.approx(10 + 0.5 * 2 + 0.01 * 1000)
    assert durations[1] == pytest.approx(10 + 0.5 * 2 + 0.01 * 999)
    assert durations[2] == pytest.approx(10 + 0.5 * 2 + 0.01 * 511)
    assert durations[3] == pytest.approx(10 + 0.5 * 2)
    assert seqs[1].kv_tokens == 2502  # the whole context is reserved from admission


def test_token_budget_limits_admissions() -> None:
    params = preset("fast", max_num_batched_tokens=100)
    sched, seqs = make(params, (60, 5), (60, 5), (60, 5))
    result = sched.step()
    assert result is not None and result.admitted == (seqs[0], seqs[1])  # 60 + 40: budget spent
    assert result.emitted == (seqs[0],) and result.prefill_tokens == 100
    assert list(sched.waiting) == [seqs[2]]


def test_queue_limit() -> None:
    sched = Scheduler(preset("fast", max_num_seqs=2, max_waiting=1))
    assert sched.can_accept(3) and not sched.can_accept(4)
    sched.add([Sequence(0, 1, 5, "length")])
    assert sched.can_accept(2) and not sched.can_accept(3)
    assert sched.step() is not None  # running now: still counts
    assert sched.can_accept(2) and not sched.can_accept(3)
    no_queue = Scheduler(preset("fast", max_num_seqs=1, max_waiting=0))
    assert no_queue.can_accept(1) and not no_queue.can_accept(2)


def test_remove_and_clear_free_everything() -> None:
    sched, seqs = make(preset("fast", max_num_seqs=1), (10, 5), (10, 5))
    assert sched.step() is not None
    sched.remove([seqs[0]])
    assert sched.kv_used == 0 and sched.running == []
    assert sched.step() is not None and sched.running == [seqs[1]]
    lost = sched.clear()
    assert lost == [seqs[1]] and sched.kv_used == 0 and not sched.has_work


@pytest.mark.parametrize(
    "bad",
    [
        {"max_num_seqs": 0},
        {"kv_cache_tokens": 100, "max_model_len": 200},
        {"reject_status": 500},
        {"max_num_seqs": 16, "max_num_batched_tokens": 8},
        {"decode_base_ms": -1.0},
        {"decode_base_ms": 0.0, "decode_per_seq_ms": 0.0},
    ],
)
def test_bad_params_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        SimParams(**bad)


def test_unknown_preset() -> None:
    with pytest.raises(ValueError, match="unknown preset"):
        preset("nope")


def test_kv_reservation_admits_only_while_prompt_plus_max_tokens_fit() -> None:
    """``kv_reserve_max_tokens`` (the kv-bound preset): the KV budget is a hard slot limit."""
    params = preset("fast", max_num_seqs=64, kv_cache_tokens=1000, max_model_len=500,
                    kv_reserve_max_tokens=True)  # fmt: skip
    sched = Scheduler(params)
    seqs = [Sequence(i, 200, 100, "length", reserve=300) for i in range(5)]
    sched.add(seqs)
    first = sched.step()
    assert first is not None and first.admitted == tuple(seqs[:3])  # 3 × 300 fit, 4 × 300 not
    assert sched.reserved == 900 and len(sched.waiting) == 2
    while seqs[0].generated < seqs[0].stop_at:
        step = sched.step()
        assert step is not None and step.preempted == ()  # a claim never needs preempting
    step = sched.step()  # the three finished together: their claims free three places
    assert step is not None and step.admitted == tuple(seqs[3:])


def test_the_kv_bound_preset_is_bound_by_its_kv_budget_between_grid_levels() -> None:
    from loadknee_locust.sim.saturation import saturation_concurrency

    kv = preset("kv-bound")
    assert kv.kv_reserve_max_tokens and kv.max_num_seqs > 24
    assert saturation_concurrency(kv, 128, 64) == 21  # 4096 // (128 + 64), loadknee run's lengths
    compute = preset("compute-bound")
    assert saturation_concurrency(compute, 128, 64) > 48  # no hard limit in the default grid
