"""Render the live sweep view (status, banners, charts, verdicts, end links) as an HTML fragment.

What a person watching wants at a glance: which stage runs and how long it has left,
the throughput curve bending, the tail against the baseline, the KV cache and the queue climbing,
the verdict of each finished stage, and, once the run ends, its files and report. The numbers
are the master's own running per-stage stats (stdlib only); the verdicts come from the analysis
in a child process (:mod:`loadknee_locust.sweep.childjobs`: the same judgement the adaptive
sweep acts on) and are marked provisional until the report is written.

Cheap for the master: the two per-stage charts are rebuilt only when a stage finishes (cached by
the count of finished stages); the telemetry charts at most every :data:`TELEMETRY_EVERY_S`.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadknee_locust.record.recorder import RunLog, percentile
from loadknee_locust.webui import openloop, svgchart
from loadknee_locust.webui.livetail import TelemetryTail

if TYPE_CHECKING:
    from loadknee_locust.arrivals.plan import OpenLoopPlan
    from loadknee_locust.curve.live import InflightTrack
    from loadknee_locust.sweep.childjobs import FinalReport
    from loadknee_locust.sweep.refine import LiveVerdict

TELEMETRY_EVERY_S = 5.0
CPU_BOUND_PCT = 90.0
PHASE_WORDS = {
    "warmup": "warm-up",
    "measure": "measuring",
    "baseline": "measuring (baseline)",
    "cooldown": "cooldown",
}
FILES_PREFIX = "/loadknee/files/"


@dataclass(frozen=True)
class Banner:
    """One line above the charts; ``level`` picks its colour (info, warn, bad, good). ``text``
    is the line a watcher reads; ``kind`` and the fields after it are what it says, for a script
    or a test that should not read the words."""

    level: str
    text: str
    #: red_line | failures | cpu_bound | answer | cannot_tell | open_loop ("" for none of these)
    kind: str = ""
    #: red_line: the stage the sweep stopped at
    stage: int | None = None
    #: failures: (stage, failed requests) of each stage with a failure
    failures: tuple[tuple[int, int], ...] = ()
    #: cpu_bound: (process, CPU %) of each load-generator process at or over CPU_BOUND_PCT
    hot: tuple[tuple[str, float], ...] = ()
    #: answer: the highest level run above its first stage past the capacity (None: none yet),
    #: and whether the sweep stopped because the knee was confirmed
    confirmed_by: int | None = None
    stopped: bool = False


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown (count-based stages)"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def cpu_readings(runner: Any) -> list[tuple[str, float]]:
    """``(process, CPU %)`` of the load generator: the master/local runner and each worker."""
    out: list[tuple[str, float]] = []
    own = getattr(runner, "current_cpu_usage", None)
    if isinstance(own, int | float):
        out.append(("this process", float(own)))
    clients = getattr(runner, "clients", None)
    for node in getattr(clients, "values", lambda: [])():
        cpu = getattr(node, "cpu_usage", None)
        if isinstance(cpu, int | float):
            out.append((f"worker {getattr(node, 'id', '?')}", float(cpu)))
    return out


def banners(
    run: RunLog | None, runner: Any, verdict: LiveVerdict | None, *, now: float
) -> list[Banner]:
    """The alerts a watcher must not miss, most serious first."""
    out: list[Banner] = []
    if run is None:
        return out
    sched = run.schedule
    if sched is not None and sched.finished and sched.position().stop_reason == "red_line":
        stage = sched.position().stage
        text = (
            f"Red line crossed at stage {stage}: the sweep stopped early (error rate or P95 over "
            "its limit)."
        )
        out.append(Banner("bad", text, "red_line", stage=stage))
    errors = {s: st.errors for s, st in sorted(run.stats.items()) if st.errors}
    if errors:
        where = ", ".join(f"stage {s}: {n}" for s, n in errors.items())
        text = f"{sum(errors.values())} failed requests ({where})."
        out.append(Banner("bad", text, "failures", failures=tuple(errors.items())))
    hot = [(name, cpu) for name, cpu in cpu_readings(runner) if cpu >= CPU_BOUND_PCT]
    if hot:
        said = ", ".join(f"{name} {cpu:.0f} %" for name, cpu in hot)
        text = f"The load generator is CPU-bound ({said}): latencies are inflated; add workers."
        out.append(Banner("warn", text, "cpu_bound", hot=tuple(hot)))
    if verdict is not None and verdict.cannot_tell:
        # the report's own "cannot tell" words over the stages so far: a provisional capacity
        # beside them would be the figure the report will refuse to give
        text = f"Provisional: {verdict.cannot_tell}"
        out.append(Banner("warn", text, "cannot_tell"))
    elif verdict is not None and verdict.capacity_words and verdict.past_users is not None:
        # the analysis's own words for the capacity (analysis.report.answer_view, as on the
        # screen and in knee.json), so the live answer reads as the report's will
        past = verdict.past_users
        above = [s.users for s in verdict.stages if s.users > past]
        stopped = sched is not None and sched.position().stop_reason == "knee_confirmed"
        if stopped:
            word = "confirmed; the sweep stopped early"
        elif above:
            word = f"confirmed by {max(above)} users"
        else:
            word = "not yet confirmed by a higher level"
        text = (
            f"Provisional answer: {verdict.capacity_words}; {word}. The deploy figure comes with "
            "the report."
        )
        out.append(
            Banner(
                "good",
                text,
                "answer",
                confirmed_by=max(above) if above else None,
                stopped=stopped,
            )
        )
    return out


def _kind_words(run: RunLog, kind: str) -> str:
    """What a stage is for, in words: a refine stage names the bracket it narrows."""
    if kind == "baseline":
        return "baseline: one user, sequential"
    if kind != "refine":
        return "grid level"
    sched = run.schedule
    latest = next(
        (v for _, v in sorted((sched.verdicts if sched else {}).items(), reverse=True) if v),
        None,
    )
    if latest is None or latest.max_concurrency is None or latest.limit_users is None:
        return "<b>refine</b>: between the capacity so far and the first stage past it"
    return (
        f"<b>refine</b>: between {latest.max_concurrency} users (the capacity so far) and "
        f"{latest.limit_users} (the first stage past it)"
    )


def _status(run: RunLog | None, runner: Any, *, now: float, rates: tuple[float, ...] = ()) -> str:
    state = str(getattr(runner, "state", ""))
    if run is None or run.schedule is None:
        return f"<p class='lk-status'>No sweep yet (Locust state: {html.escape(state)}).</p>"
    sched = run.schedule
    pos = sched.position()
    plan = sched.stages[pos.stage]
    last = len(sched.stages) - 1
    if sched.finished:
        reason = pos.stop_reason or "done"
        return (
            f"<p class='lk-status' data-stage='{pos.stage}' data-finished='1'>"
            f"<b>Sweep finished</b> after stage {pos.stage} of {last} (stop reason: "
            f"{html.escape(str(reason))}).</p>"
        )
    phase = PHASE_WORDS.get(pos.phase, pos.phase)
    running = int(getattr(runner, "user_count", 0) or 0)
    load = f"<b>{plan.users} users</b> planned, {running} running"
    steps = [p.index for p in sched.stages if p.kind != "baseline"]
    if rates and plan.kind != "baseline" and steps.index(pos.stage) < len(rates):
        load = f"<b>{rates[steps.index(pos.stage)]:g} requests/s</b> offered (open loop)"
    kind = "rate stage" if rates and plan.kind != "baseline" else _kind_words(run, plan.kind)
    return (
        f"<p class='lk-status' data-stage='{pos.stage}' data-kind='{html.escape(plan.kind)}' "
        f"data-finished='0'><b>Stage {pos.stage} of {last}</b> ({kind}) · "
        f"{load} · phase <b>{phase}</b> · "
        f"left in stage: {_duration(sched.stage_seconds_left(now))} · "
        f"left in sweep: {_duration(sched.seconds_left(now))}</p>"
    )


def _finished_rows(run: RunLog) -> list[dict[str, Any]]:
    sched = run.schedule
    if sched is None:
        return []
    rows = []
    for rec in sched.closed:
        stats = run.stage_stats(rec.stage)
        rows.append(
            {
                "stage": rec.stage,
                "kind": rec.kind,
                "users": rec.target_users,
                "tok_s": stats.output_tokens_per_s(rec.target_users),
                "e2e_p50": percentile(stats.e2e_ms, 50.0),
                "e2e_p95": percentile(stats.e2e_ms, 95.0),
                "ttft_p50": percentile(stats.ttft_ms, 50.0),
                "ttft_p95": percentile(stats.ttft_ms, 95.0),
            }
        )
    return rows


def stage_charts(run: RunLog) -> str:
    """Throughput and latency against users, over the finished stages."""
    rows = _finished_rows(run)
    # refine stages run between grid levels: the lines follow users, not the order they ran in
    steps = sorted((r for r in rows if r["kind"] != "baseline"), key=lambda r: r["users"])
    base = next((r for r in rows if r["kind"] == "baseline"), None)
    one = base or (steps[0] if steps else None)
    per_user = (one["tok_s"] / one["users"]) if one and one["tok_s"] else None

    def pts(key: str) -> tuple[tuple[float, float | None], ...]:
        return tuple((float(r["users"]), r[key]) for r in steps)

    ideal = tuple((float(r["users"]), per_user * r["users"]) for r in steps) if per_user else ()
    tput = _users_chart(
        "throughput", "Output tokens/s by users", "tok/s",
        svgchart.Series("measured", pts("tok_s")),
        svgchart.Series("ideal linear", ideal, dashed=True, color="#9ca3af"),
    )  # fmt: skip
    hline = None
    if base is not None and base["e2e_p95"] is not None:
        hline = ("baseline e2e P95", float(base["e2e_p95"]))
    lat = _users_chart(
        "latency", "Latency by users (ms)", "ms",
        svgchart.Series("e2e P50", pts("e2e_p50")),
        svgchart.Series("e2e P95", pts("e2e_p95")),
        svgchart.Series("TTFT P50", pts("ttft_p50")),
        svgchart.Series("TTFT P95", pts("ttft_p95")),
        hline=hline,
    )  # fmt: skip
    return tput + lat


def _users_chart(
    key: str,
    title: str,
    unit: str,
    *series: svgchart.Series,
    hline: tuple[str, float] | None = None,
) -> str:
    """One chart of the finished stages against users (a log2 axis: the levels double)."""
    chart = svgchart.Chart(key, title, "users", unit, series, hline=hline, log2_x=True)
    return svgchart.render(chart)


def _time_chart(key: str, title: str, unit: str, *series: svgchart.Series) -> str:
    """One chart of the telemetry against the seconds since the run started."""
    return svgchart.render(svgchart.Chart(key, title, "seconds since start", unit, series))


def telemetry_charts(tail: TelemetryTail, start_unix_s: float) -> str:
    """KV cache / GPU memory % and waiting requests over time since the run started."""

    def pts(name: str) -> tuple[tuple[float, float | None], ...]:
        values = list(tail.series[name])
        step = max(1, len(values) // 300)  # at most ~300 points a line
        return tuple((t - start_unix_s, v) for t, v in values[::step])

    charts = _time_chart(
        "memory", "KV cache and GPU memory (%)", "%",
        svgchart.Series("KV cache", pts("kv_pct")),
        svgchart.Series("GPU mem", pts("gpu_mem_pct")),
    )  # fmt: skip
    charts += _time_chart(
        "waiting", "Waiting requests (server queue)", "requests",
        svgchart.Series("waiting", pts("waiting"), color="#ef4444"),
    )  # fmt: skip
    if tail.series["cache_hit_pct"]:  # only when the server counts prefix-cache lookups
        charts += _time_chart(
            "cache", "Prefix-cache hit rate between scrapes (%)", "%",
            svgchart.Series("hit rate", pts("cache_hit_pct"), color="#10b981"),
        )  # fmt: skip
    return charts


def curve_chart(track: InflightTrack) -> str:
    """A curve replay's chart: the log's curve × scale beside the measured in-flight count."""
    target, measured = track.points()
    chart = svgchart.Chart(
        "curve",
        "Requests in flight: the log's curve and measured",
        "seconds of replay",
        "in flight",
        (
            svgchart.Series("log curve × scale", target, dashed=True, color="#9ca3af"),
            svgchart.Series("measured", measured, color="#3b82f6"),
        ),
    )
    return svgchart.render(chart)


#: after a noisy stage's verdict, as ``?`` after it in the record table
NOISY_MARK = (
    "<span class='lk-noisy' title='too noisy or short to judge: its throughput interval is too "
    "wide (see why)'>?</span>"
)


def verdict_table(run: RunLog, verdict: LiveVerdict | None, final: bool) -> str:
    """One row per finished stage, ordered by users (refine stages fall between grid levels)."""
    by_stage = {s.stage: s for s in verdict.stages} if verdict is not None else {}
    sched = run.schedule
    if sched is None or not sched.closed:
        return ""
    label = "verdict" if final else "verdict (provisional)"
    lines = [
        f"<table class='lk-verdicts'><thead><tr><th>stage</th><th>users</th><th>kind</th>"
        f"<th>{label}</th><th>why</th></tr></thead><tbody>"
    ]
    for rec in sorted(sched.closed, key=lambda r: (r.kind != "baseline", r.target_users)):
        v = by_stage.get(rec.stage)
        word = html.escape(v.verdict) if v else "…"
        why = html.escape("; ".join(v.reasons)) if v else "analysing"
        if v is not None and not v.trusted:
            why += " (the load generator was the limit: not trusted)"
        # a noisy stage's verdict carries the record table's "?" mark, with its meaning on hover
        mark = NOISY_MARK if v is not None and v.noisy and rec.kind != "baseline" else ""
        if rec.kind == "baseline":  # the yardstick, judged by no rule
            word, why = "baseline", "the single-user reference the later stages are read against"
        lines.append(
            f"<tr data-stage='{rec.stage}' data-users='{rec.target_users}'><td>{rec.stage}</td>"
            f"<td>{rec.target_users}</td><td>{html.escape(rec.kind)}</td>"
            f"<td><span class='lk-v lk-v-{word.replace(' ', '-')}'>{word}</span>{mark}</td>"
            f"<td>{why}</td></tr>"
        )
    lines.append("</tbody></table>")
    return "".join(lines)


def end_links(run: RunLog, report: FinalReport | None) -> str:
    """Links to the run directory's files and its report (served by the same web UI)."""
    run_dir = run.run_dir
    files = sorted(p.name for p in run_dir.iterdir() if p.is_file()) if run_dir.is_dir() else []
    items = [
        f"<a href='.{FILES_PREFIX}{html.escape(name)}' target='_blank'>{html.escape(name)}</a>"
        for name in files
    ]
    state = report.state if report is not None else "none"
    if state == "done":
        rep = (
            f"<a class='lk-report' href='.{FILES_PREFIX}report/report.html' target='_blank'>"
            "Open the report (report.html)</a>"
        )
        if report is not None and report.cannot_tell:
            rep += " — the run cannot tell its capacity; the report says why and what to do"
    elif state == "running":
        rep = "<span class='lk-report-wait'>The report is being written (loadknee analyze)…</span>"
    else:
        rep = f"<span>No report ({html.escape(state)}); run <code>loadknee analyze</code>.</span>"
    return (
        f"<div class='lk-end'><b>Run directory</b> <code>{html.escape(str(run_dir))}</code>: "
        + " · ".join(items)
        + f"<br>{rep}</div>"
    )


class LiveView:
    """The fragment of one Locust process, with its caches (one per :class:`Loadknee`)."""

    def __init__(self) -> None:
        self._stage_key: tuple[Path, int] | None = None
        self._stage_svg = ""
        self._tail: TelemetryTail | None = None
        self._tele_at = 0.0
        self._tele_svg = ""
        self._sends = openloop.PlannedSends()

    def fragment(
        self,
        run: RunLog | None,
        runner: Any,
        verdict: LiveVerdict | None,
        report: FinalReport | None,
        *,
        now: float | None = None,
        open_plan: OpenLoopPlan | None = None,
    ) -> str:
        """The view; ``open_plan``: an open-loop rate run's plan (its rates replace the users:
        :mod:`~loadknee_locust.webui.openloop`'s table and chart replace the sweep's)."""
        now = time.time() if now is None else now
        result = verdict
        rates = open_plan.rates if open_plan is not None else ()
        answer = result.rates if result is not None else None
        parts = [_status(run, runner, now=now, rates=rates)]
        found = banners(run, runner, None if rates else result, now=now)
        ended = run is not None and (
            run.test_stopped or bool(run.schedule and run.schedule.finished)
        )
        final = bool(ended and report and report.state == "done")
        if rates and (words := openloop.knee_words(answer, final)):
            found.append(Banner("good", words, "open_loop"))
        parts.extend(f"<div class='lk-banner lk-{b.level}'>{html.escape(b.text)}</div>"
                     for b in found)  # fmt: skip
        if run is None or run.schedule is None:
            return "".join(parts)
        key = (run.run_dir, len(run.schedule.closed))
        if key != self._stage_key:
            self._stage_key, self._stage_svg = key, stage_charts(run)
        if self._tail is None or self._tail.run_dir != run.run_dir:
            self._tail, self._tele_at = TelemetryTail(run.run_dir), 0.0
        if now - self._tele_at >= TELEMETRY_EVERY_S or (ended and not self._tele_svg):
            self._tail.update()
            self._tele_svg = telemetry_charts(self._tail, run.schedule.start_unix_s)
            self._tele_at = now
        track = getattr(run, "curve_track", None)  # a curve replay: the log beside measured
        curve = curve_chart(track) if track is not None else ""
        if open_plan is not None and rates:
            rows = openloop.rate_rows(
                openloop.rate_windows(run, open_plan, self._sends), answer, now
            )
            chart = openloop.rate_chart(rows)
            parts.append(f"<div class='lk-charts'>{chart}{self._tele_svg}</div>")
            parts.append(openloop.rate_table(rows, final))
        else:
            parts.append(f"<div class='lk-charts'>{curve}{self._stage_svg}{self._tele_svg}</div>")
            parts.append(verdict_table(run, result, final=final))
        if ended:
            parts.append(end_links(run, report))
        return "".join(parts)
