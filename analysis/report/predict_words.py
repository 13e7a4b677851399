"""The words of ``loadknee predict``: a :class:`~analysis.predict.facts.Prediction` on screen.

The prediction is facts (:mod:`analysis.predict`); this module is the only place they become
sentences: the answer first (capacity and deploy figure with their intervals, the limit that
binds and why), then what the run measured, the fitted model, how far the prediction reaches
beyond the run, a few levels' figures, and the one ``loadknee run`` command that would check it;
and, for ``--check``, the prediction against what a second run measured (:func:`check_text`).
"""

from __future__ import annotations

import shlex

from analysis.model import CannotTell
from analysis.predict.facts import (
    Agreement,
    Bound,
    Capacity,
    CapacityFit,
    Check,
    DecodeSource,
    Estimate,
    InSampleMiss,
    KvSource,
    LengthMix,
    LevelMetric,
    OutputSource,
    Prediction,
    PrefillSource,
    SlotSource,
)
from analysis.predict.kv_peak import POINT_PERCENTILE
from analysis.report.advice_words import BOUND_WORDS as DEPLOY_BOUND_WORDS
from analysis.report.standing import CANNOT_TELL_SHORT

BOUND_WORDS: dict[Bound, str] = {
    "slots": "the slot limit",
    "kv": "the KV budget",
    "compute": "the decode step growing with the batch (compute)",
    "none": "nothing within the levels looked at",
}
#: a capacity the predicted KV use ended (``ends_with`` memory), in place of its ``bound``
MEMORY_WORDS = "memory: the KV cache's predicted use"


def bound_text(point: Capacity) -> str:
    """What binds a predicted capacity: the memory where its KV use ended it, else its bound."""
    return MEMORY_WORDS if point.ends_with == "memory" else BOUND_WORDS[point.bound]


PREFILL_WORDS: dict[PrefillSource, str] = {
    "ttft_fit": "fitted on TTFT against prompt tokens",
    "probe_fit": "measured: {probes} single-request probes at {lengths} prompt lengths before "
    "the sweep",
    "baseline_assumed": "assumed: the prompts' lengths did not vary, so the baseline's median "
    "TTFT less one decode step, over its prompt tokens",
    "in_step": "no TTFT: no tokens were streamed, so the prefill rides inside the step",
}
DECODE_WORDS: dict[DecodeSource, str] = {
    "itl": "median inter-token latency",
    "tpot": "median TPOT, the time per token from the usage counts: the streams carried "
    "~{tokens} tokens a chunk, so a chunk's gap is several tokens' time",
    "e2e_per_token": "median e2e per completion token where nothing waited: no tokens streamed",
}
SLOT_WORDS: dict[SlotSource, str] = {
    "server_gauge": "the server's running gauge while requests waited",
    "engine": "the engine's own report at pre-flight: llama-server's /props",
    "probe": "the concurrency probe before the sweep: {streamed}",
    "client_estimate": "estimated from the client's rows (no server gauge)",
    "throughput_plateau": "assumed: no gauge and no client-side estimate, so the batch the "
    "decode line needs to give the plateau's throughput",
    "stated": "stated with --slots",
    "none": "none seen",
}
KV_WORDS: dict[KvSource, str] = {
    "kv_gauge": "KV gauge × tokens in flight",
    "knee_assumed": "assumed: no KV gauge, so the batch where the knee sat × prompt + "
    "completion; the run cannot tell the slots from the KV budget: --kv-tokens states it",
    "stated": "stated with --kv-tokens",
    "per_slot": "none: llama-server admits by slot, each slot with its own context, so a "
    "longer context does not lower the slots",
    "probe": "the concurrency probe before the sweep: {streamed}, fewer at the longer context; "
    "the budgets that hold those counts",
    "probe_unseen": "none: the concurrency probe before the sweep saw no KV limit at twice the "
    "prompt",
    "none": "no gauge and no hard limit: none assumed",
}


def _n(value: float, digits: int = 3) -> str:
    if abs(value) < 1e-9:  # a fit's rounding noise around zero
        return "0"
    return f"{value:,.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def _est(e: Estimate, digits: int = 3) -> str:
    if e.low == e.high:
        return _n(e.value, digits)
    return f"{_n(e.value, digits)} ({_n(e.low, digits)}–{_n(e.high, digits)})"


def span_text(users: int | None, low: int | None, high: int | None) -> str:
    if users is None:
        return "—"
    if low is None or high is None or low == high == users:
        return f"{users}"
    return f"{users} (90 % interval {low}–{high})"


def _tok(value: float) -> str:
    return f"{value:g}" if value == round(value) else f"{value:.1f}"


def _lengths(p: Prediction) -> str:
    w = p.workload
    mix = "a mix averaging " if w.context_tokens is not None else ""
    return f"{mix}{_tok(w.input_tokens)} prompt + {_tok(w.output_tokens)} completion tokens"


def why_text(p: Prediction) -> str:
    """Why the limit that binds binds, in one sentence."""
    point, fit = p.point, p.fit
    if point is None:
        return ""
    slots = fit.params.slots
    per_seq = p.workload.reserved_tokens
    kv = fit.params.kv_tokens
    past = next((lv for lv in p.levels if point.users and lv.users == point.users + 1), None)
    used = None if past is None else past.kv_pct
    limit = p.memory_limit
    window = p.peak_window
    if point.ends_with == "memory" and kv and past and used is not None and window is not None:
        shown = f"{used:.1f}" if limit is None or round(used, 1) > limit else f"{used:.2f}"
        return (
            f"at {past.users} users the stage's peak KV use ({batch_text(past.batch)} running "
            "sequences "
            f"drawn from the mix's {len(p.workload.lengths)} sampled records, a "
            f"{window.seconds:g}-s stage read {window.samples} times) reaches {shown} % of "
            f"the KV budget (~{_n(kv.value)} tokens) in {100 - POINT_PERCENTILE:g} % of stages: "
            f"above the {limit:g} % "
            "memory threshold"
        )
    if point.ends_with == "memory" and kv and past and used is not None and limit is not None:
        return (
            f"at {past.users} users the model's {batch_text(past.batch)} running sequences, "
            "each holding "
            f"~{p.workload.held_tokens:.0f} tokens on average (prompt + half the completion), "
            f"fill {used:.0f} % of the KV budget (~{_n(kv.value)} tokens): above the "
            f"{limit:g} % memory threshold"
        )
    if point.bound == "kv" and kv is not None:
        beside = f", below the {slots:g} slots" if slots is not None else ""
        return (
            f"the KV budget (~{_n(kv.value)} tokens) holds {p.kv_slots:g} sequences of "
            f"{per_seq:.0f} tokens{beside}"
        )
    if point.bound == "slots" and slots is not None:
        room = f"; the KV budget would hold {p.kv_slots:g}" if p.kv_slots is not None else ""
        return f"the server runs at most {slots:g} sequences at once{room}"
    if point.bound == "compute" and point.users is not None:
        if past is None:
            return "no hard limit binds first: the step grows with the batch"
        if point.ends_with == "tail":
            return (
                f"no hard limit binds first: the step grows with the batch until at "
                f"{past.users} users the e2e is {past.tail_ratio:.2f}× the 1-user e2e "
                f"(limit {p.tail_ratio_limit:g}×)"
            )
        gain = 0.0 if past.gain_ratio is None else past.gain_ratio
        return (
            f"no hard limit binds first: the step grows with the batch until at "
            f"{past.users} users an added user brings {gain:.0%} of one user's throughput "
            f"(flat below {p.flat_gain_limit:.0%})"
        )
    return "no limit binds within the levels looked at"


def _unknown(fit: CapacityFit) -> str:
    """Why the run cannot tell its capacity, in a few words (``fit.cannot_tell`` is set)."""
    return CANNOT_TELL_SHORT[fit.cannot_tell] if fit.cannot_tell else ""


def _measured(fit: CapacityFit) -> str:
    b = fit.run_bound
    w = fit.workload
    if fit.cannot_tell is not None:
        return (
            f"run {fit.run_id} measured: cannot tell its capacity at {w.input_tokens:g} + "
            f"{w.output_tokens:g} tokens ({_unknown(fit)}: `loadknee analyze` on the run says "
            "why and what to re-run)"
        )
    cap = "—" if fit.measured_capacity is None else f"{fit.measured_capacity}"
    deploy = fit.measured_deploy
    if deploy is not None and deploy != fit.measured_capacity:
        cap += f" (deploy answer {deploy})"
    evidence = []
    if b.knee_users is not None:
        evidence.append(f"knee at {b.knee_users} users")
    if b.running_at_knee is not None:
        evidence.append(f"{b.running_at_knee:.1f} running there")
    if b.kv_peak_pct_at_knee is not None:
        evidence.append(f"KV peak {b.kv_peak_pct_at_knee:.1f} %")
    if b.slots is not None and b.kv_slots is not None:
        evidence.append(f"slots {b.slots:g}, KV room for {b.kv_slots:.0f}")
    return (
        f"run {fit.run_id} measured: capacity {cap} users at {w.input_tokens:g} + "
        f"{w.output_tokens:g} tokens, bound by {BOUND_WORDS[b.bound]}"
        + (f" ({'; '.join(evidence)})" if evidence else "")
    )


#: the latency profile's decode figure (``latency-profile.yaml``'s ``step_from``)
MEAN_TOKEN_WORDS = (
    "median TPOT, the time per token from the usage counts: the mean a token took, the steps "
    "that also ran a newcomer's prefill included (a queueing model's time per token)"
)


def batch_text(batch: float | None) -> str:
    """A model's batch: a whole count as it is, a mix's mean batch (a fraction) to one decimal
    (None: "—")."""
    if batch is None:
        return "—"
    return f"{batch:g}" if float(batch).is_integer() else f"{batch:.1f}"


def decode_source_text(source: DecodeSource, tokens_per_chunk: float | None) -> str:
    """Which per-token figure the decode line was fitted on (``tokens_per_chunk``: the most a
    stage's stream chunks carried, said where the line is on TPOT)."""
    tokens = "several" if tokens_per_chunk is None else f"{tokens_per_chunk:.3g}"
    return DECODE_WORDS[source].format(tokens=tokens)


def _streamed(fit: CapacityFit) -> str:
    """The probe's two counts: "15 streamed at once at 272 tokens a request, 7 at 528"."""
    if fit.probe is None:
        return "no bursts kept"
    short, long = fit.probe.bursts
    return (
        f"{short.at_once} streamed at once at {short.context:g} tokens a request, "
        f"{long.at_once} at {long.context:g}"
    )


def _slot_source(fit: CapacityFit) -> str:
    seen = fit.run_bound.slots
    if fit.params.slots is None and fit.run_bound.bound == "kv" and seen is not None:
        return f"the running maximum, {seen:g}, was the KV budget's: no slot limit of its own seen"
    return SLOT_WORDS[fit.slot_source].format(streamed=_streamed(fit))


def _prefill_source(fit: CapacityFit) -> str:
    lengths = len({tokens for tokens, _ in fit.prefill_probes})
    return PREFILL_WORDS[fit.prefill_source].format(probes=len(fit.prefill_probes), lengths=lengths)


def _model(fit: CapacityFit) -> list[str]:
    p = fit.params
    lines = [
        f"  step = {_est(p.alpha_ms)} + {_est(p.beta_ms)} ms × batch "
        f"({fit.decode_points} stages, "
        f"{decode_source_text(fit.decode_source, fit.tokens_per_chunk)}; 95 % intervals)",
        f"  prefill {_est(p.prefill_ms_per_token)} ms per prompt token ({_prefill_source(fit)})",
        f"  slots {'—' if p.slots is None else f'{p.slots:g}'} ({_slot_source(fit)})",
    ]
    if fit.step_model == "measured":
        offsets = ", ".join(f"{ms:+.1f} ms at {batch:g}" for batch, ms in fit.step_shape)
        lines.insert(
            1,
            "  the step as measured, not the line (it reproduces the run's own latency better): "
            f"the line plus each batch's offset from it, {offsets} (the end ones held beyond)",
        )
    if p.kv_tokens is None:
        lines.append(f"  KV budget — ({KV_WORDS[fit.kv_source].format(streamed=_streamed(fit))})")
    else:
        where = ""
        if fit.kv_pct is not None and fit.kv_stage_users is not None:
            where = f": {fit.kv_pct:.1f} % at {fit.kv_stage_users} users"
        lines.append(
            f"  KV budget {_est(p.kv_tokens, 4)} tokens "
            f"({KV_WORDS[fit.kv_source].format(streamed=_streamed(fit))}{where})"
        )
    return lines


def misfit_text(m: InSampleMiss) -> str:
    """How far the model misses the run it was fitted from, at its worst level."""
    return (
        f"at {m.users} user{'s' if m.users != 1 else ''} it gives {m.model_ms:.0f} ms where the "
        f"run measured a median of {m.measured_ms:.0f} ms, {_pct(m.miss)}, over the "
        f"{m.limit * 100:g} % allowed"
    )


def _reach(p: Prediction) -> str:
    largest = f"{p.fit.max_batch:g}"
    if p.refusal == "beyond_measured" and p.point is not None:
        return (
            f"refused: the capacity would need a batch of {batch_text(p.point.batch)}, over "
            f"{p.widened_by:.1f}× the largest the run measured ({largest}); run a sweep "
            "that reaches it"
        )
    if p.extrapolated and p.point is not None:
        return (
            f"extrapolates: a batch of {batch_text(p.point.batch)} beyond the largest the run "
            "measured "
            f"({largest}); β's interval widened ×{p.widened_by:.2f}"
        )
    return f"within what the run measured (largest batch {largest})"


def _table(p: Prediction) -> list[str]:
    header = f"  {'users':>5}  {'batch':>5}  {'limit':>5}  {'TTFT ms':>8}  {'e2e ms':>8}  "
    header += f"{'out tok/s':>9}  {'tail ×':>6}"
    rows = [header]
    for lv in p.levels:
        rows.append(
            f"  {lv.users:>5}  {batch_text(lv.batch):>5}  "
            f"{lv.limit if lv.limit != 'none' else '-':>5}  "
            f"{lv.ttft_ms:>8.0f}  {lv.e2e_ms:>8.0f}  {lv.output_tok_s:>9.0f}  "
            f"{lv.tail_ratio:>6.2f}"
        )
    return rows


def check_command(p: Prediction, prompt_log: str | None = None) -> str:
    """The ``loadknee run`` that would check the prediction (``prompt_log``: replaying it)."""
    host = p.fit.host or "URL"
    levels = ",".join(str(u) for u in p.check_levels)
    w = p.workload
    lengths = (
        ["--prompt-log", prompt_log]
        if prompt_log is not None
        else ["--input-tokens", f"{w.input_tokens:g}", "--output-tokens", f"{w.output_tokens:g}"]
    )
    return shlex.join(["loadknee", "run", "--host", host, *lengths, "--levels", levels])


_OUTPUT_SOURCE_WORDS: dict[OutputSource, str] = {
    "observed": "observed reply lengths",
    "cap": "max_tokens caps (upper bounds: replies may stop earlier)",
    "run_mean": "the run's own mean (no length in the record)",
}


def unreadable_log_text(path: str, reason: str) -> str:
    """The one line for a prompt log ``--prompt-log`` cannot read (the indexer's reason, which
    never quotes a record)."""
    return f"cannot read the prompt log {path}: {reason}"


def mix_text(mix: LengthMix) -> str:
    """The prompt log's mix in two lines: what was read, and what the model was driven with."""
    w = mix.workload
    sources = ", ".join(f"{n} {_OUTPUT_SOURCE_WORDS[s]}" for s, n in mix.output_sources)
    estimated = (
        f"; {mix.input_estimated} prompts counted as characters / {mix.chars_per_token:g} "
        "(text, no token counts: an estimate)"
        if mix.input_estimated
        else ""
    )
    bad = f", {mix.bad} unreadable" if mix.bad else ""
    return (
        f"mix: {mix.log_file}, {mix.sampled} of {mix.records} records{bad}: prompt "
        f"{mix.input_mean:.0f} tokens on average (p5–p95 {mix.input_p5:.0f}–{mix.input_p95:.0f}), "
        f"completion {mix.output_mean:.0f} (p5–p95 {mix.output_p5:.0f}–{mix.output_p95:.0f}; "
        f"{sources}){estimated}\n"
        f"  modelled as the mean work per request: {w.input_tokens:.0f} + "
        f"{w.output_tokens:.0f} tokens, each running sequence holding {w.reserved_tokens:.0f} "
        "KV tokens (the context averaged over each request's time in the batch)"
    )


def prediction_text(
    p: Prediction, mix: LengthMix | None = None, prompt_log: str | None = None
) -> str:
    """The screen of ``loadknee predict`` (``mix``: the prompt log's lengths it predicts at,
    ``prompt_log``: the path the check command replays)."""
    point = p.point
    if p.refusal == "source_cannot_tell":
        return (
            f"PREDICT: no prediction at {_lengths(p)}: the run cannot tell its own capacity, "
            "and a what-if fitted from it would pass that doubt on as a number\n" + _measured(p.fit)
        )
    if p.refusal == "model_misfit" and p.misfit is not None:
        lines = [
            f"PREDICT: no prediction at {_lengths(p)}: the model does not reproduce the run it "
            f"was fitted from: {misfit_text(p.misfit)}; its step line and prefill cost do not "
            "describe this server (a step that is no straight line in the batch, say), so a "
            "prediction from it would be a guess",
            _measured(p.fit),
            "model (from the run):",
            *_model(p.fit),
        ]
        return "\n".join(lines)
    if p.refusal == "no_decode_fit":
        return (
            f"PREDICT: no prediction at {_lengths(p)}: the run's decode step could not be "
            "fitted against its batch (fewer than three judged stages, or no spread in the "
            "batch)\n" + _measured(p.fit)
        )
    lines = []
    if point is None or point.users is None or p.refusal is not None:
        lines.append(f"PREDICT: no capacity at {_lengths(p)}")
    else:
        lines.append(
            f"PREDICT: capacity {span_text(point.users, p.low, p.high)} users at {_lengths(p)}, "
            f"bound by {bound_text(point)}"
        )
        offline = span_text(point.offline_users, p.offline_low, p.offline_high)
        lines.append(
            f"deploy: {point.users} concurrent requests (interactive: before the tail departs "
            f"or the throughput flattens); offline batch {offline}"
        )
        lines.append(f"why: {why_text(p)}")
    lines.append(f"reach: {_reach(p)}")
    lines.append(_measured(p.fit))
    lines.append("model (from the run):")
    lines += _model(p.fit)
    if p.levels:
        lines.append("predicted levels:")
        lines += _table(p)
    if p.check_levels:
        lines.append("check it (not run here: a real sweep at these lengths):")
        lines.append(f"  {check_command(p, prompt_log)}")
    if mix is not None:
        lines.insert(1, mix_text(mix))
    return "\n".join(lines)


def _pct(error: float) -> str:
    whole = round(error * 100)
    return "0 %" if whole == 0 else f"{whole:+d} %"


def _measured_span(low: int | None, high: int | None) -> str:
    if high is None:
        return f"no stage past it: {low} or more"
    if low == high:
        return f"exactly {low}: a gauge or its next level pins it"
    return f"its levels place it at {low}–{high}"


def _agreement_line(
    name: str, predicted: str | None, a: Agreement, cannot_tell: CannotTell | None
) -> str:
    """One predicted figure against what the run measured (``predicted`` None: refused)."""
    span = _measured_span(a.measured_low, a.measured_high)
    measured = "—" if a.measured is None else f"{a.measured} ({span})"
    if cannot_tell is not None:
        measured = f"cannot tell ({CANNOT_TELL_SHORT[cannot_tell]}: no capacity to check)"
    if predicted is None:
        return f"  {name}: no prediction; measured {measured}"
    head = f"  {name}: predicted {predicted}, measured {measured}"
    if a.inside is None or a.error is None or a.raw_error is None:
        return head
    verdict = "inside the interval" if a.inside else "OUTSIDE the interval"
    return (
        f"{head}: {verdict}; error {_pct(a.error)} beyond the run's resolution "
        f"({_pct(a.raw_error)} against {a.measured})"
    )


def _capacity_lines(c: Check) -> list[str]:
    """The deploy figure against the run's deploy answer; the offline batch against its knee."""
    p, m = c.prediction, c.measured
    point = p.point if p.point is not None and p.refusal is None else None
    unjudged = c.deploy_against_knee
    name = "deploy, against the run's knee" if unjudged else "deploy"
    predicted = None if point is None else span_text(point.users, p.low, p.high)
    lines = [_agreement_line(name, predicted, c.deploy, m.cannot_tell)]
    if unjudged and m.deploy_bound is not None:
        lines.append(
            f"  (its deploy answer, {m.deploy_users}, was bound by "
            f"{DEPLOY_BOUND_WORDS[m.deploy_bound]}, which the model does not predict)"
        )
    if c.offline.measured is not None and point is not None:
        offline = span_text(point.offline_users, p.offline_low, p.offline_high)
        lines.append(_agreement_line("offline batch (the knee)", offline, c.offline, None))
    return lines


#: per level metric, the line above the levels' table
LEVEL_HEADINGS: dict[LevelMetric, str] = {
    "e2e_ms": "e2e per level: the model's (every request's: it has no spread, so it sits below a "
    "P95 by the run's own spread) against the measured P95",
    "slowdown": "slowdown per level (a length mix): the model's e2e over its e2e at one user (it "
    "has no spread, so it sits a little below a P95) against the measured P95 of each "
    "request's e2e over its own single-user time",
}
#: per level metric, the table's two figure headers and its number format
LEVEL_COLUMNS: dict[LevelMetric, tuple[str, str, str]] = {
    "e2e_ms": ("predicted ms", "P95 ms", ".0f"),
    "slowdown": ("predicted ×", "P95 ×", ".2f"),
}


def _level_rows(c: Check) -> list[str]:
    predicted, measured, spec = LEVEL_COLUMNS[c.levels[0].metric]
    header = f"  {'users':>5}  {predicted:>20}  {measured:>8}  {'error':>6}  inside"
    rows = [header]
    for lv in c.levels:
        span = format(lv.predicted, spec)
        if lv.low is not None and lv.high is not None:
            low, high = format(lv.low, spec), format(lv.high, spec)
            span += "" if low == high else f" ({low}–{high})"
        rows.append(
            f"  {lv.users:>5}  {span:>20}  {format(lv.measured_p95, spec):>8}  "
            f"{_pct(lv.error):>6}  {'yes' if lv.inside else 'no'}"
        )
    return rows


def check_text(c: Check) -> str:
    """The screen of ``loadknee predict --check``."""
    p, m = c.prediction, c.measured
    source = "" if m.workload_source == "rows" else " (lengths from run.json: no ok row counted)"
    lines = [
        f"CHECK: run {m.run_id} at {_lengths(p)}{source}, predicted from run {p.fit.run_id}",
        *_capacity_lines(c),
    ]
    if p.refusal == "no_decode_fit":
        lines.append("  no prediction: the source run's decode step could not be fitted")
    elif p.refusal == "source_cannot_tell":
        unknown = _unknown(p.fit)
        lines.append(f"  no prediction: the source run cannot tell its own capacity ({unknown})")
    elif p.refusal == "model_misfit" and p.misfit is not None:
        missed = misfit_text(p.misfit)
        lines.append(f"  no prediction: the model does not reproduce the source run: {missed}")
    else:
        lines.append(f"  reach: {_reach(p)}")
    if c.levels:
        lines.append(LEVEL_HEADINGS[c.levels[0].metric])
        lines += _level_rows(c)
    lines.append(_measured(p.fit))
    if p.refusal not in ("no_decode_fit", "source_cannot_tell"):
        lines.append("model (from the run):")
        lines += _model(p.fit)
    return "\n".join(lines)
