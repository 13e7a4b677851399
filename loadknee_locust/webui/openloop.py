"""The live view of an open-loop rate run: offered vs served rate, the backlog and the rate knee.

A ``--llm-rates`` run offers a planned rate per stage whatever the server does, so what a watcher
needs is whether the server keeps up: per stage the rate offered, the rate served, the requests
planned but not yet answered (the backlog: waiting for a slot under ``--llm-max-in-flight``,
queued at the server, or running) and, once the analysis names it, the rate knee.

Two sources, one table. While a stage runs the numbers are the master's own (stdlib, cheap):
the planned sends come from the run's own plan (:class:`~loadknee_locust.arrivals.plan.
OpenLoopPlan`: seeded, the same schedule the dispatchers send), the answered ones from the
recorder's per-stage counts (:class:`~loadknee_locust.record.recorder.StageStats`: a row belongs
to the stage of its planned send). Live, ``offered`` is the planned sends in the measured window
so far per second and ``served`` the ones of them answered ok so far per second (shown from the
window's first second, :data:`MIN_SPAN_S`), so a request
still running counts in the backlog, not as served; with workers, rows reach the master with
their reports (~3 s later), and the backlog reads that much high. Once the analysis has judged a
finished stage (``python -m analysis.live.answer`` in a child, :mod:`~loadknee_locust.sweep.
rateanswer`), its row shows the analysis's exact figures (knee.json's ``rate_stages``), its
verdict and reasons, marked provisional until the report is written.
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadknee_locust.sweep.rateanswer import RateAnswer, RateStageJudgement
from loadknee_locust.webui import svgchart

if TYPE_CHECKING:
    from loadknee_locust.arrivals.plan import OpenLoopPlan
    from loadknee_locust.record.recorder import RunLog


#: the measured seconds before a live rate is shown: over less, one send more or less swings it
MIN_SPAN_S = 1.0


@dataclass(frozen=True)
class RateWindow:
    """What the master knows of one rate stage: its plan, its times, its answered rows."""

    stage: int
    rate_rps: float
    start_unix_s: float
    warmup_end_unix_s: float
    measure_end_unix_s: float  # a planned fact for timed stages
    planned_s: tuple[float, ...]  # planned sends, sorted offsets (s) from the stage's start
    ended: int  # rows of the stage that ended, any outcome
    served: int  # measured rows answered ok


@dataclass(frozen=True)
class LiveRow:
    """A rate stage the analysis has not judged yet: the master's own numbers (``live_row``)."""

    stage: int
    rate_rps: float
    offered_rps: float | None
    served_rps: float | None
    served_pct: float | None
    backlog: float | None  # requests outstanding now


#: one row of the open-loop table: the live numbers until the analysis has judged the stage,
#: then its judgement as the answer carries it (one record of a judged stage, not a copy)
RateRow = LiveRow | RateStageJudgement


def live_row(w: RateWindow, now: float) -> LiveRow:
    """The master's numbers for ``w`` at ``now`` (module docstring)."""

    def due(until: float) -> int:  # planned sends at or before ``until``
        return bisect.bisect_right(w.planned_s, until - w.start_unix_s)

    stop = min(now, w.measure_end_unix_s)
    span = stop - w.warmup_end_unix_s
    offered = served = pct = None
    if span >= MIN_SPAN_S:
        # planned sends in [warm-up end, stop): the analysis's window, so a finished stage's
        # offered rate is the analysis's figure
        count = bisect.bisect_left(w.planned_s, stop - w.start_unix_s) - bisect.bisect_left(
            w.planned_s, w.warmup_end_unix_s - w.start_unix_s
        )
        offered, served = count / span, w.served / span
        pct = 100.0 * served / offered if offered > 0 else None
    backlog = float(max(0, due(now) - w.ended)) if now >= w.start_unix_s else None
    return LiveRow(w.stage, w.rate_rps, offered, served, pct, backlog)


def rate_rows(
    windows: Sequence[RateWindow], answer: RateAnswer | None, now: float
) -> list[RateRow]:
    """One row per rate stage seen so far: the analysis's where it has judged, else live."""
    judged = {s.stage: s for s in answer.stages} if answer is not None else {}
    return [judged.get(w.stage) or live_row(w, now) for w in windows]


class PlannedSends:
    """Each rate stage's planned send offsets, drawn once per run (the plan is seeded)."""

    def __init__(self) -> None:
        self._key: Any = None
        self._by_step: dict[int, tuple[float, ...]] = {}

    def of(self, plan: OpenLoopPlan, step: int, run_key: Any) -> tuple[float, ...]:
        if self._key != (run_key, plan):
            self._key, self._by_step = (run_key, plan), {}
        if step not in self._by_step:
            arrivals = plan.stage_arrivals(step, plan.stage_seconds)
            self._by_step[step] = tuple(sorted(a.offset_s for a in arrivals))
        return self._by_step[step]


def rate_windows(run: RunLog, plan: OpenLoopPlan, sends: PlannedSends) -> list[RateWindow]:
    """The rate stages finished or running, in order (the closed-loop baseline is none)."""
    sched = run.schedule
    if sched is None:
        return []
    times = {r.stage: (r.start_unix_s, r.warmup_end_unix_s, r.measure_end_unix_s)
             for r in sched.closed}  # fmt: skip
    start = sched.stage_start()
    pos = sched.position()
    if start is not None and not pos.finished and pos.stage not in times:
        stage_plan = sched.stages[pos.stage]
        warm = start + stage_plan.warmup_seconds
        times[pos.stage] = (start, warm, warm + stage_plan.measure_seconds)
    out = []
    steps = [p for p in sched.stages if p.kind != "baseline"]
    for step, stage_plan in enumerate(steps):
        if stage_plan.index not in times or step >= len(plan.rates):
            continue
        t0, warm, end = times[stage_plan.index]
        stats = run.stage_stats(stage_plan.index)
        out.append(
            RateWindow(
                stage_plan.index, plan.rates[step], t0, warm, end,
                sends.of(plan, step, run.run_dir), stats.ended, stats.served,
            )
        )  # fmt: skip
    return out


def _num(value: float | None, digits: int = 2) -> str:
    return "…" if value is None else f"{value:.{digits}f}"


def rate_chart(rows: Sequence[RateRow]) -> str:
    """Offered and served requests/s by planned rate, beside the plan itself."""
    ordered = sorted(rows, key=lambda r: r.rate_rps)
    planned = tuple((r.rate_rps, r.rate_rps) for r in ordered)
    chart = svgchart.Chart(
        "rates",
        "Offered vs served (requests/s)",
        "planned rate (requests/s)",
        "requests/s",
        (
            svgchart.Series("offered", tuple((r.rate_rps, r.offered_rps) for r in ordered)),
            svgchart.Series("served", tuple((r.rate_rps, r.served_rps) for r in ordered)),
            svgchart.Series("planned", planned, dashed=True, color="#9ca3af"),
        ),
        log2_x=True,
    )
    return svgchart.render(chart)


def rate_table(rows: Sequence[RateRow], final: bool) -> str:
    """The open-loop table: one row per rate stage, live or judged."""
    if not rows:
        return ""
    label = "rate verdict" if final else "rate verdict (provisional)"
    lines = [
        "<table class='lk-rates'><thead><tr><th>stage</th><th>planned/s</th><th>offered/s</th>"
        "<th>served/s</th><th>served %</th><th>backlog (requests)</th>"
        f"<th>{label}</th><th>why</th></tr></thead><tbody>"
    ]
    for r in rows:
        if isinstance(r, RateStageJudgement):
            judged, outstanding = True, r.backlog_mean
            backlog = (
                f"{_num(outstanding, 1)} on average ({_num(r.backlog_first, 1)} → "
                f"{_num(r.backlog_last, 1)})"
            )
            word = html.escape(r.verdict)
            why = html.escape(r.reasons) or "served followed offered"
        else:
            judged, outstanding = False, r.backlog
            backlog = f"{_num(outstanding, 0)} now"
            word, why = "…", "live: the analysis judges the stage once it ends"
        attrs = "".join(
            f" data-{key}='{value:.10g}'" if value is not None else ""
            for key, value in (("offered", r.offered_rps), ("served", r.served_rps),
                               ("backlog", outstanding))
        )  # fmt: skip
        lines.append(
            f"<tr data-stage='{r.stage}' data-rate='{r.rate_rps:g}' "
            f"data-judged='{int(judged)}'{attrs}><td>{r.stage}</td><td>{r.rate_rps:g}</td>"
            f"<td>{_num(r.offered_rps)}</td><td>{_num(r.served_rps)}</td>"
            f"<td>{_num(r.served_pct, 0)}</td><td>{backlog}</td>"
            f"<td><span class='lk-v lk-v-{word.replace(' ', '-')}'>{word}</span></td>"
            f"<td>{why}</td></tr>"
        )
    lines.append("</tbody></table>")
    return "".join(lines)


def knee_words(answer: RateAnswer | None, final: bool) -> str | None:
    """The banner's sentence: the rate knee so far, in the report's words (``final``: the
    report is written, so the answer is no longer provisional)."""
    if answer is None or not answer.stages or not answer.text:
        return None
    if final:
        return f"Open loop: {answer.text} (the report has the details)."
    return f"Provisional: {answer.text}. The report confirms it."


def is_open_loop(shape: Any) -> bool:
    """Whether Locust's shape sends open-loop load (:class:`~loadknee_locust.arrivals.shape.
    OpenLoopShape` says so; read, not imported: the shape stands above the web UI)."""
    return getattr(shape, "open_loop", False) is True


def open_loop_plan(environment: Any) -> OpenLoopPlan | None:
    """The plan of the running open-loop rate test, or None (closed loop, a replay, bad
    options: the view then shows the sweep's own charts)."""
    from loadknee_locust.arrivals.plan import OpenLoopPlan
    from loadknee_locust.plugin.options import llm_options

    if not is_open_loop(getattr(environment, "shape_class", None)):
        return None
    try:
        plan = OpenLoopPlan.from_options(llm_options(environment))
    except ValueError:
        return None
    return plan if plan.rates else None
