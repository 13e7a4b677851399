"""A real loadknee sweep against llama.cpp's llama-server: calibration, zero loss, the knee.

llama-server is built once from the llama.cpp sources in the llama-cpp-python sdist (cached outside
the repo, see ``tests/realengine/engine.py``; ``tests/conftest.py`` builds it before any test
starts) and serves a 98.6M-parameter random-weight model made locally, with ``--parallel 4`` slots
and ``--metrics``. With 4 slots, requests past the 4th wait in the server's queue
(``llamacpp:requests_deferred``): TTFT and the tail jump while throughput stops growing, so the
knee must land past 4 users and at most at 8 (the grid's level, or a refine stage between them)
with a reason naming the queue, the tail must have departed at twice the slots, and the
recommended max_concurrency must be the 4 slots. ``--stop-after-knee -1`` keeps the 8-user level
(twice the slots), whose queue the server's own counts must show.

Why 4 slots and not more: on one kind of 2-core machine (no AVX-512) this model's compute is spent
at about 4 sequences at once on one thread (median ITL 21-24 ms at 1, 28-32 ms at 4, 44-47 ms at
5-6 and 52-54 ms at 8; 100 tok/s at 4 users, 102-111 at 8, in five runs). An 8-slot server is
compute-bound past 4 users, so its knee is at 5 users with no queue at all, which the product said
(CI at 0223b4b: "4 → 5 users lost 15 tok/s"); a test that asked for a knee at the 8 slots was
asking for a wrong answer that noise sometimes gave. With 4 slots the slots bind first.

Which limit binds is the engine's, on the CPU it gets, and the fixture measures it before the
sweep (``decode_step_ms``): on an AVX-512 machine (AMD EPYC, fresh run #14) llama.cpp decodes one
sequence in 7.4 ms and two in 18.9 ms (its one-sequence path is a matrix-vector product; two or
more take the batched kernel), so the tail doubles at 2 users with no slot short; 4 users then
serve 40-50 % more than one, 13-16 % of one user's rate per added user, against the 15 % that
makes 2 users' flat step a dip, and the fit over all stages may put the breakpoint at 3. The
product's rules straddle that engine, and noise tips them: on one AMD EPYC box it answered 1 (the
compute knee at 2 users), 3 (the fit's knee at 4 users) and, twice, "cannot tell". Each test asks
for what the measured step allows (:func:`_expected`): the slot knee where the engine batches;
there, the slot knee or a knee where throughput flattened with an answer within the 4 slots, or
"cannot tell" with its evidence. The queue past the 4 slots at 8 users is checked on both kinds.

ONE sweep (one server, recorded alone before the test processes start: tests/realengine/
llama_sweep.py; the module's ``sweep`` fixture reads it) serves every test here; each test asserts
on its run directory what only a real engine can show: rows that are all ok and exactly on target
(llama-server closes each connection after its answer and counts tokens with its own tokenizer),
nothing lost against the server's own log, the slot knee from its queue, the answer without its
counters, its metric names in the autoscaler files and the record columns, its token counter
against the rows, and an SLO capacity. (A second, short sweep on its own 4-slot server used to
check the fixed-length rows; this sweep's rows are fixed-length too, from the same tokenizer, so
its checks now run on them.)

The tests are skipped (with the reason) only where no C++ toolchain exists to build the server.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from analysis.inputs.load import read_run
from analysis.stages.summary import summarize_stages
from loadknee_core.numeric import counted
from loadknee_core.slo_targets import parse_slo
from tests.analysis.stages.gauge_agreement import gauge_agreement
from tests.realengine import llama_sweep
from tests.realengine.engine import missing_tools
from tests.realengine.llama_sweep import INPUT_TOKENS, OUTPUT_TOKENS, SLOTS
from tests.support.counter_check import stage_counts
from tests.support.late_client import late_cannot_tell_doc

#: the sweep itself is recorded alone, before the test processes start (tests/realengine/
#: llama_sweep.py, tests/conftest.py): these tests read its run directory beside the others
pytestmark = [pytest.mark.slow, pytest.mark.realengine]

#: the lowest answer that still uses what the server serves: a refine stage at 3 users may be
#: read as the last comfortable one (see the knee test); 2 would leave 40 % of it unused
LEAST_SERVED = 3
#: the engine batches when its step with the slots full is under this many times its one-sequence
#: step (measured 1.2-1.4×): the tail stays under 2× until requests queue past the slots
BATCHES_BELOW = 1.5


@dataclass(frozen=True)
class Sweep:
    """The one sweep's run directory and what was read off the server around it."""

    url: str
    tmp: Path  # a folder of this module's own, for the copies and reports made from the run
    run_dir: Path
    rows: list[dict[str, str]]
    info: dict[str, Any]
    served: int  # generation tasks the server finished during the sweep (its own log)
    knee: dict[str, Any]  # report/knee.json, as `loadknee analyze` wrote it
    step_ms: dict[int, float]  # the engine's decode step with 1, 2 and SLOTS sequences at once
    answered: bool  # False: "cannot tell", with its evidence (:func:`_answered`)


@dataclass(frozen=True)
class Expected:
    """An answer the engine's measured step implies: the knee's users, the capacity, and a word
    its stage's reasons must hold."""

    limit: str  # "slots" or "compute"
    knee_users: range
    capacity: range
    word: str


SLOT_BOUND = Expected("slots", range(SLOTS + 1, 2 * SLOTS + 1), range(LEAST_SERVED, SLOTS + 1),
                      "queue")  # fmt: skip
#: where the engine does not batch, what holds whichever way its noise tips the product's rules:
#: never more than the 4 slots it has, the knee where throughput flattened
UNBATCHED = Expected("compute", range(2, 2 * SLOTS + 1), range(1, SLOTS + 1),
                     "throughput has flattened")  # fmt: skip


def _expected(step_ms: dict[int, float]) -> tuple[Expected, ...]:
    """What the product may answer on this engine: the slot knee where it batches. Where it does
    not (one sequence on a fast path, two or more at 2.2-2.6× its step), the product's rules
    straddle that engine: 1 → 4 users gain 13-16 % of one user's rate per added user against the
    15 % that calls 2 users' flat step a dip, and the fit over all stages may put the breakpoint
    at 3. Four runs on one AMD EPYC box answered 1 (the knee at 2 users), 3 (the fit's knee at 4)
    and, twice, "cannot tell"; so there the test holds what is true whichever way noise tips it:
    the slot knee with its queue, or a knee where throughput flattened and an answer within the
    slots; or "cannot tell" with its evidence (:func:`_answered`)."""
    if step_ms[SLOTS] < BATCHES_BELOW * step_ms[1]:
        return (SLOT_BOUND,)
    return (SLOT_BOUND, UNBATCHED)


def _answered(
    done: subprocess.CompletedProcess[str], doc: dict[str, Any], step_ms: dict[int, float]
) -> bool:
    """True when ``loadknee`` answered (exit 0); False when it said "cannot tell" (exit 3), which
    only an engine with two answers within its noise may get, and only with its evidence."""
    if done.returncode == 0:
        return True
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(_expected(step_ms)) > 1, (step_ms, done.stdout[-3000:])
    assert late_cannot_tell_doc(doc), doc.get("standing")
    return False


def _require_toolchain() -> None:
    missing = missing_tools()
    if missing:
        pytest.skip(f"cannot build llama-server here: {', '.join(missing)} not installed")


def _loadknee(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "loadknee_locust", *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:  # say where it hung, not just "timeout"
        out = "".join(
            x.decode(errors="replace") if isinstance(x, bytes) else x or ""
            for x in (exc.stdout, exc.stderr)
        )
        pytest.fail(f"loadknee {args[0]} did not finish in {timeout_s:g} s:\n{out[-3000:]}")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """One default sweep (refinement on) over 1..8 users against the 4-slot server, analysed:
    the controller's recording (tests/realengine/llama_sweep.py), or this process's own where
    the controller recorded none."""
    _require_toolchain()
    tmp = tmp_path_factory.mktemp("llama")
    recorded = llama_sweep.load()
    if recorded is None:  # no recording named: this process records its own
        assert not os.environ.get(llama_sweep.ENV), "the controller's recording is unreadable"
        recorded = llama_sweep.record(tmp)
    print(f"decode step, ms by sequences at once: {recorded.step_ms}; "
          f"recorded in {recorded.seconds:.0f} s")  # fmt: skip
    run, run_dir = recorded.completed(), Path(recorded.run_dir)
    assert (run_dir / "report" / "knee.json").exists(), run.stdout[-3000:] + run.stderr[-3000:]
    with (run_dir / "requests.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    info = json.loads((run_dir / "run.json").read_text())
    print((run_dir / "report" / "record.md").read_text())  # the record table, for the CI log
    knee = json.loads((run_dir / "report" / "knee.json").read_text())
    # `loadknee run` ends with the answer: the analysis, as `loadknee analyze` runs it
    answered = _answered(run, knee, recorded.step_ms)
    assert ("\nDEPLOY: " in run.stdout) == answered, run.stdout
    return Sweep(recorded.url, tmp, run_dir, rows, info, recorded.served, knee,
                 recorded.step_ms, answered)  # fmt: skip


def test_every_row_is_ok_and_exactly_on_target(sweep: Sweep) -> None:
    """No stale-connection failures, and every fixed-length row exactly on target.

    llama-server closes each connection right after its streamed answer (while advertising
    Keep-Alive): loadknee learns that from the first streamed response, before any socket is
    reused, and never reuses a socket to it (``servers_closing_after_response``). The prompt's
    words are chosen with the server's /tokenize (``vocabulary.kind`` "tokenizer"), so every
    prompt costs exactly the asked tokens on the server's own count, and ``length_ok`` says so.
    """
    rows = sweep.rows
    outcomes = Counter(r["outcome"] for r in rows)
    errors = Counter((r["outcome"], r["error"], r["prompt_tokens"]) for r in rows)
    # a random-weight model now and then streams tokens that render as no text at all (about 1
    # row in 250 when the short check ran the tiny "model" with 24-token answers, seen with usage
    # exact): an honest empty_response, not a client fault
    odd = outcomes - Counter(ok=outcomes["ok"], empty_response=min(outcomes["empty_response"], 1))
    assert len(rows) >= 20 and not odd, errors
    assert {r["length_ok"] for r in rows if r["outcome"] == "ok"} == {"1"}
    assert sweep.info["prompt_source"]["servers_closing_after_response"] == [
        sweep.url.removeprefix("http://")
    ]
    # exact lengths from the server's usage, calibrated against its tokenizer
    assert {r["completion_tokens"] for r in rows} == {str(OUTPUT_TOKENS)}
    assert {r["prompt_tokens"] for r in rows} == {str(INPUT_TOKENS)}
    assert {r["usage_source"] for r in rows} == {"server"}
    source = sweep.info["prompt_source"]
    assert source["vocabulary"]["kind"] == "tokenizer", source


def test_every_generation_the_server_finished_is_a_row(sweep: Sweep) -> None:
    """Nothing lost: the server's own log counts each finished generation once."""
    rows, info = sweep.rows, sweep.info
    # every generation the server finished is a row (or a calibration probe: the prompt
    # length's and the prefill probes', and the concurrency probe's bursts, counted as setup
    # requests)
    setup = info["prompt_source"].get("setup_requests", {})
    probes = int(setup.get("calibration_probes", 0))
    probes += int(setup.get("preflight_concurrency_probes", 0))
    reached = [r for r in rows if r["http_status"]]
    # the pre-flight's one short generation request is a setup request too (run.json counts it)
    probes += int(setup.get("preflight_requests", 0))
    assert sweep.served == len(reached) + probes, (sweep.served, len(reached), probes)
    outcomes = {r["outcome"] for r in rows}
    # at most the one request that raced the first close is lost, reported (never resent: it
    # may have been read) with no HTTP status, and the count above proves it unserved
    dropped = [r for r in rows if r["outcome"] == "connect_error" and not r["http_status"]]
    assert outcomes <= {"ok", "connect_error"}, sorted(outcomes)
    assert len(dropped) <= 1, (len(dropped), len(rows))


def _matching(result: dict[str, Any], step_ms: dict[int, float]) -> Expected:
    """The expected answer this knee result is, or a failure saying what was expected."""
    knee_stage = next(s for s in result["stages"] if s["stage"] == result["knee_stage"])
    words = " ".join(knee_stage["reasons"]) + " " + knee_stage["bottleneck_reason"]
    for expected in _expected(step_ms):
        if result["knee_users"] in expected.knee_users and expected.word in words:
            return expected
    raise AssertionError(
        f"decode step {step_ms} ms implies {_expected(step_ms)}; got knee at "
        f"{result['knee_users']} users: {words}"
    )


def test_sweep_finds_the_knee_the_engines_step_implies(sweep: Sweep) -> None:
    """The slot knee from the server's queue where the engine batches; the compute knee at 2
    users where its two-sequence step is twice its one-sequence step (the module's docstring)."""
    result = sweep.knee["knee"]
    expected = _matching(result, sweep.step_ms)
    # the tail: at twice the slots (8) half the requests wait a whole service time, so P95
    # must be past 2× the single-user tail there, named in each stage's reasons: departed, or, when
    # the machine's noise reaches below 2×, said to be undecided (never silent, never "held"). At
    # a refine stage just past 4 (5 users: 1 waiting) the rise is smaller than a noisy
    # baseline's spread, and the knee rests on the server's own queue counts alone (a busy
    # machine's baseline can reach P95 2.8 s at P50 1.0 s; P95 at twice the slots then reads
    # 2.58×, at least 1.9× within the noise).
    # The yardstick itself can be inflated: on a fresh machine beside the suite, the 1-user
    # level read P95 11.7 s at P50 2.4 s, and twice the slots' 11.6 s was then 0.99× it. The product
    # must not call that tail held: its interval (the stage's high end over the yardstick's low
    # end) reaches 2×, so it says it cannot tell; below 2× at the point it never says more.
    for stage in (s for s in result["stages"] if s["target_users"] >= 2 * SLOTS):
        said = " ".join(stage["reasons"])
        tail = next(g for g in stage["signals"] if g["name"] == "tail_departure")
        outcome = tail["fact"]["outcome"]
        assert outcome in ("departed", "undecided"), (stage["target_users"], tail["text"])
        if outcome == "departed":
            assert tail["value"] >= 2.0, (stage["target_users"], tail["text"])
        else:  # cannot tell: the interval spans 2×, wherever the point figure sits
            upper = tail["fact"]["upper_ratio"]
            assert tail["value"] >= 2.0 or (upper is not None and upper >= 2.0), tail["text"]
        told = any(f"{verdict} the tail has departed" in said for verdict in (":", "whether"))
        assert "P95" in said and told, (stage["target_users"], said)
    # what these 4 slots can serve at once: at most 4 (past them requests wait in the server's
    # queue), and at least LEAST_SERVED (2 users get 58-63 tok/s, 4 users 93-103); where the
    # compute binds at 2 users, the one user it serves at its one-sequence step
    assert result["max_concurrency"] in expected.capacity, (expected, result["summary"])


def test_without_server_metrics_the_answer_stays_within_the_same_bounds(sweep: Sweep) -> None:
    """The same run directory without its server_metrics.csv (no second sweep): the answer rests
    on the client's own rows, and lands within the same bounds as with the server's counters."""
    hidden = sweep.tmp / "hidden"
    shutil.copytree(
        sweep.run_dir, hidden, ignore=shutil.ignore_patterns("report", "server_metrics.csv")
    )
    blind = _loadknee("analyze", str(hidden), "--quiet")
    blind_doc = json.loads((hidden / "report" / "knee.json").read_text())
    _answered(blind, blind_doc, sweep.step_ms)
    blind_knee = blind_doc["knee"]
    expected = _matching(blind_knee, sweep.step_ms)
    assert blind_knee["max_concurrency"] in expected.capacity, (expected, blind_knee["summary"])


def test_llamacpp_metric_names_reach_the_record_and_the_autoscaler_files(sweep: Sweep) -> None:
    report = sweep.run_dir / "report"
    if not sweep.answered:  # "cannot tell" writes no autoscaler file: nothing to scale on
        assert not (report / "keda-scaledobject.yaml").exists()
        assert not (report / "hpa.yaml").exists()
    else:  # the autoscaler files scale on llama.cpp's own names (analysis/cluster)
        _autoscaler_files_name_llamacpp(report)
    _queue_at_twice_the_slots(sweep)


def _autoscaler_files_name_llamacpp(report: Path) -> None:
    keda = (report / "keda-scaledobject.yaml").read_text()
    hpa = (report / "hpa.yaml").read_text()
    assert "# Engine: llama.cpp" in keda and "vllm:" not in keda + hpa, keda
    assert "llamacpp:requests_processing" in keda and "llamacpp:requests_processing" in hpa


def _queue_at_twice_the_slots(sweep: Sweep) -> None:
    # llama.cpp's metric names reached the canonical running / waiting columns
    # at twice the slots, 4 requests wait beside the 4 running; a scrape may fall while a few
    # users are between a finished request and their next one, so at least half of them
    summary = {row["target_users"]: row for row in sweep.knee["summary"]}
    assert summary[2 * SLOTS]["waiting_max"] >= SLOTS // 2, summary[2 * SLOTS]
    assert summary[2 * SLOTS]["running_max"] == SLOTS, summary[2 * SLOTS]


def test_the_clients_running_estimate_matches_the_servers_gauge(sweep: Sweep) -> None:
    """The client's estimate of the requests running (the slots from the requests decoding at
    once, ``analysis/stages/slot_count``) against llama-server's own
    ``llamacpp:requests_processing``, within 10 % at every stage, read at the gauge's sample
    instants (samples that catch a request in transit, in neither of the server's counts, are
    left out and counted: tests/analysis/stages/gauge_agreement). With 8 slots, at 8 users on the
    server's one thread every request takes about a service time to its first token (a batched
    prefill), with nothing waiting: a wait read off TTFT put 4.8-5.2 running there against the
    gauge's 8.0."""
    run = read_run(sweep.run_dir)
    agreement = gauge_agreement(run, summarize_stages(run))
    print(*agreement, sep="\n")
    # every stage of the sweep is compared (the grid's four, and its refine stages)
    swept = [row for row in sweep.knee["summary"] if row["kind"] in ("step", "refine")]
    assert len(agreement) == len(swept), (agreement, swept)
    kept, left = sum(a.samples for a in agreement), sum(a.in_transit for a in agreement)
    assert left <= 0.25 * (kept + left), agreement
    for a in agreement:
        assert a.within(0.10), a


def test_each_stage_matches_the_servers_token_counter(sweep: Sweep) -> None:
    """Every stage's tokens against llama-server's own counter, exactly: over the scrape samples
    around each window, the completion tokens of the rows that ended between them equal the
    counter's increase (it jumps by a request's tokens at its slot release; a row ending within a
    scrape of the edge may fall on either side, and so may a whole batch that ended within one
    engine step of it: with fixed lengths the requests admitted together end together)."""
    counts = stage_counts(sweep.run_dir, "llamacpp:tokens_predicted_total")
    assert len(counts) == len(sweep.knee["summary"])  # the baseline, the step and refine stages
    for c in counts:
        print(c)
        either_side = max(2 * OUTPUT_TOKENS, c.edge_tokens)
        assert abs(c.row_tokens_aligned - c.server_tokens_aligned) <= either_side, c
    # and the record table's tok/s against the counter's rate for the grid's stages. The table
    # counts each request's share generated inside the window; the counter counts a request only
    # when it ends, so the requests still running at the window's end separate the two by up to
    # users × OUTPUT_TOKENS / window (with 64-token answers, a 4-user stage's 7.5 s window: 34
    # tok/s, 12 % of its rate):
    # within 10 % beyond that bound (the exact token check above covers the accounting itself)
    for c in (c for c in counts if c.kind == "step"):
        in_flight = c.users * OUTPUT_TOKENS / c.aligned_s
        assert abs(c.output_tok_s - c.server_tok_s_aligned) <= (
            0.10 * c.server_tok_s_aligned + in_flight
        ), c


def test_slo_capacity_from_the_same_run_is_latency_bound(sweep: Sweep) -> None:
    """SLO capacity from the same run directory (no second sweep): a TTFT P95 limit between the
    stage at the knee's answer (the 4 slots, or 2 users where the compute binds there) and the
    stage below it gives the lower one's users as capacity, at or below the knee's answer:
    latency-bound. On a busy machine a stage of ~35
    requests can put 2's P95 above 4's (one slow request is its P95), or 1's above the limit: then
    the capacity is still what the rule gives (the unbroken run of passing stages from the
    lowest, grid and refine levels alike, computed here by hand) and the product must say it
    cannot tell, since a stage above the break passes again."""
    ttft = {row["target_users"]: row["ttft_p95_ms"] for row in sweep.knee["summary"]
            if row["kind"] in ("step", "refine")}  # fmt: skip
    answer = sweep.knee["knee"]["max_concurrency"]
    upper = min(users for users in ttft if users > 1 and users >= answer)
    lower = max(users for users in ttft if users < upper)
    limit = float(f"{(ttft[lower] * ttft[upper]) ** 0.5:.1f}")  # as given on the command line
    passing = [users for users in sorted(ttft) if ttft[users] <= limit]
    by_rule = next((u for u in sorted(ttft) if u not in passing), None)
    expected = max((u for u in passing if by_rule is None or u < by_rule), default=None)
    report = sweep.tmp / "report-slo"
    slo_run = _loadknee(
        "analyze", str(sweep.run_dir), "--quiet", "--out", str(report),
        "--slo", f"ttft_p95_ms={limit}",
    )  # fmt: skip
    slo_doc = json.loads((report / "knee.json").read_text())
    slo_answered = _answered(slo_run, slo_doc, sweep.step_ms)
    print(slo_run.stdout)
    said = " ".join(slo_run.stdout.split())  # the screen wraps its lines at 100 characters
    slo = slo_doc["slo"]
    assert (slo["capacity"], slo["binding"]) == (expected, "latency"), (slo["summary"], ttft)
    # the screen's SLO capacity: its users (none without one), its limits and what binds
    cap = "none" if expected is None else counted(expected, "user")
    shown = f"{cap} ({slo['limits']}), {slo['binding']}-bound"
    # ("cannot tell" puts the noise's answers on the screen instead of the capacities)
    assert ("".join(shown.split()) in "".join(said.split())) == slo_answered, slo_run.stdout
    again = [users for users in passing if by_rule is not None and users > by_rule]
    if again:  # a noisy stage broke the run below the answer and one above passed: cannot tell
        assert slo["doubt"] and slo["doubt"] in slo["summary"], slo["summary"]
        assert f"{', '.join(map(str, again))} users" in slo["doubt"], slo["doubt"]
    assert slo["limits"] == parse_slo(f"ttft_p95_ms={limit}").text()  # the limit given, shown
