"""The plain-text pieces the terminal and ``record.md`` both print, so they read the same:
the warnings before trusting the numbers, the SLO answer, each recommendation with its reason.

Apart from :mod:`analysis.report.writer` so that the terminal's answer
(:mod:`analysis.report.screen`) does not import what writes the report folder (matplotlib for the
plots, the page, the cluster files): ``loadknee analyze`` prints the answer before it writes them.
"""

from __future__ import annotations

from analysis.advice.facts import Recommendations
from analysis.advice.recommend import flag_text
from analysis.diagnosis.failures import (
    all_failed_warnings,
    late_client_warnings,
    shared_host_warning,
    small_stage_warnings,
)
from analysis.pipeline import Analysis
from analysis.report.advice_words import reason_text, withheld_text
from analysis.report.diagnosis_words import (
    all_failed_text,
    late_client_text,
    shared_host_text,
    small_stage_text,
)
from analysis.report.slo_words import breaks_text, limits_text, summary_text
from analysis.report.stage_words import baseline_note_text, provisional_text
from analysis.slo.evaluate import SloResult
from loadknee_core.numeric import counted


def collect_warnings(analysis: Analysis) -> tuple[str, ...]:
    """What a reader must know before trusting the numbers: baseline, load notes, client-bound."""
    warnings = [baseline_note_text(w) for w in analysis.baseline.warnings]
    warnings += list(analysis.run.notes)
    untrusted = [v.target_users for v in analysis.knee.stages if not v.trusted]
    if untrusted:
        warnings.append(
            "client-bound stages (the load generator was the limit, verdicts not trusted): "
            + ", ".join(counted(u, "user") for u in untrusted)
        )
    for name, frame in (
        ("gpu.csv", analysis.run.gpu),
        ("server metrics", analysis.run.server_metrics),
    ):
        if frame.empty:
            warnings.append(f"no {name} samples: the memory / KV-cache signals could not be used")
    warnings += [small_stage_text(f) for f in small_stage_warnings(analysis.summary)]
    warnings += [late_client_text(f) for f in late_client_warnings(analysis.summary)]
    shared = shared_host_warning(analysis.summary, analysis.run.run_info)
    if shared is not None:
        warnings.append(shared_host_text(shared))
    warnings += [all_failed_text(f) for f in all_failed_warnings(analysis.run.requests)]
    if analysis.rate_knee is not None:
        warnings.append(
            "open-loop rate stages: each ran one dispatcher per process, so the concurrency "
            "verdicts and recommendations read 1 user; the rate columns and the rate knee are "
            "this run's answer"
        )
    late = _streams_stamped_when_read(analysis.run.run_info)
    if late:
        warnings.append(
            f"{late} of the streams were stamped when the client read them, not with the kernel's "
            "receive time (TLS, or no SO_TIMESTAMPNS here): on a busy load generator their TTFT "
            "and ITL include its own delay (~1-3 ms at 64 streams on 2 cores)"
        )
    return tuple(warnings)


def _streams_stamped_when_read(run_info: dict) -> str | None:
    """ "n of m" when some streams were stamped after the read (``prompt_source.stream_stamps``)."""
    source = run_info.get("prompt_source")
    stamps = source.get("stream_stamps") if isinstance(source, dict) else None
    if not isinstance(stamps, dict):
        return None
    counts = {k: v for k, v in stamps.items() if isinstance(v, int)}
    late = counts.get("readline", 0)
    return f"{late:,} of {sum(counts.values()):,}" if late else None


def slo_text(slo: SloResult) -> str:
    """The SLO answer beside the knee: limits used, capacity, what binds, goodput per stage."""
    lines = [f"SLO: {limits_text(slo.params)}"]
    lines += [f"  preset {source}" for source in slo.sources]
    lines.append(summary_text(slo))
    for stage in slo.stages:
        good = "" if stage.good_pct is None else f", {stage.good_pct:.1f} % good"
        if stage.goodput_rps is not None:
            good += f", goodput {stage.goodput_rps:.3g} req/s"
        state = "met" if stage.met else "broken: " + "; ".join(breaks_text(stage.breaks))
        lines.append(f"  {counted(stage.target_users, 'user'):>10}: {state}{good}")
    return "\n".join(lines)


def value_text(value: object) -> str:
    """A recommended value for print: a 2-item list is a range ("16-19"), lists comma-joined."""
    if isinstance(value, list | tuple):
        return ("-" if len(value) == 2 else ", ").join(str(v) for v in value)
    return str(value)


def recommendations_text(recs: Recommendations) -> str:
    """Each setting with its reason; then each server flag on its own line with what it came
    from, so a pasted line carries its evidence; then what was withheld and why. A cut run's
    settings are marked provisional first."""
    lines = [
        f"  {item.key} = {value_text(item.value)}   # {reason_text(item)}"
        for item in recs.items
        if item.key != "deploy_concurrency"  # printed first, on its own (the DEPLOY line)
    ]
    if recs.provisional:
        lines.insert(0, f"  PROVISIONAL: {provisional_text(recs.provisional)}")
    flags = [item for item in recs.items if item.key.startswith("vllm.")]
    if flags:
        lines.append("  server flags (each from the evidence after #):")
        lines += [f"    {flag_text(item)}   # {reason_text(item)}" for item in flags]
    lines += [f"  {withheld_text(note)}" for note in recs.withheld]
    return "\n".join(lines) if lines else "  (none)"
