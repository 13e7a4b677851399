"""Headroom measured by a curve replay: which scale, and which minute of the log, broke first.

A run made with ``--llm-replay-curve LOG --llm-curve-scales 1,1.5,2,…`` replays the log's
in-flight curve once per scale; its stages are time windows of the replay, and ``run.json``'s
``curve`` block says each window's scale and log span (:mod:`loadknee_locust.curve.plan`). The
run is analysed as any sweep (record table, knee over the windows by their users); then:

1. **The first window past the knee**: in run order (scales ascending as given), the first
   window whose verdict is ``knee`` or ``red_line``, or whose users are above what the run
   allows (:func:`~analysis.traffic.headroom.run_capacity`: the stage before the knee). Its
   scale is the measured breaking scale, its log span the minute of the day that broke first.
2. **Scales that held**: every scale all of whose windows came before that one.

3. **Did the replay follow the log?** (:func:`tracking`) Per window, the measured mean number
   of requests in flight (each row's overlap with the window's measured span, ÷ its length)
   against the log's curve × scale there; their RMS difference over the windows, as a share of
   the curve's peak. Above :data:`FOLLOW_RMS_PCT` the replay did not produce the log's
   concurrency (a load generator short of CPU falls below it; requests that outlast a steep
   fall of the curve keep it above, since a closed-loop user finishes its request before it
   stops): it says so and names the worst window; what the replay shows is then the traffic it
   sent, not the log's.

None when the run is not a curve replay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from analysis.pipeline import Analysis
from analysis.traffic.headroom import Capacity

PAST = ("knee", "red_line")
#: the replay followed the log when the RMS of (measured − planned in flight) per window is at
#: most this share of the curve's peak (the issue's acceptance figure)
FOLLOW_RMS_PCT = 10.0


@dataclass(frozen=True)
class Tracking:
    """How closely a curve replay's measured in-flight count followed the log's curve."""

    windows: int
    planned: tuple[float, ...]  # the log's mean in flight × scale, per window
    measured: tuple[float, ...]  # requests in flight, time-weighted mean per window
    rms: float
    peak: float  # the curve's peak (scale 1)
    rms_pct: float  # rms / (peak × the largest scale replayed)
    followed: bool
    text: str


def tracking(run: Any) -> Tracking | None:
    """Measured vs planned in flight per window (see the module docstring, step 3)."""
    curve: Any = run.run_info.get("curve")
    if not isinstance(curve, dict) or not curve.get("windows"):
        return None
    planned_by_stage = {int(w["stage"]): float(w["curve_mean_users"]) for w in curve["windows"]}
    scale_by_stage = {int(w["stage"]): float(w["scale"]) for w in curve["windows"]}
    req = run.requests
    starts = req["start_unix_s"].to_numpy(dtype=float)
    ends = req["end_unix_s"].to_numpy(dtype=float)
    ok = np.isfinite(starts) & np.isfinite(ends)
    starts, ends = starts[ok], ends[ok]
    planned, measured, scales = [], [], []
    for st in run.stages.itertuples():
        stage = int(st.stage)
        a, b = float(st.warmup_end_unix_s), float(st.measure_end_unix_s)
        if stage not in planned_by_stage or not b > a:
            continue
        overlap = np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0.0, None)
        planned.append(planned_by_stage[stage])
        measured.append(float(overlap.sum()) / (b - a))
        scales.append(scale_by_stage[stage])
    if not planned:
        return None
    diff = np.asarray(measured) - np.asarray(planned)
    rms = float(np.sqrt(np.mean(diff**2)))
    peak = float(curve.get("curve_peak_users") or max(planned))
    top = peak * max(scales)
    pct = 100.0 * rms / top if top > 0 else math.inf
    followed = pct <= FOLLOW_RMS_PCT
    if followed:
        text = (
            f"curve replay followed the log: in flight within RMS {rms:.2f} per window "
            f"({pct:.1f} % of its {top:.3g} peak)"
        )
    else:
        worst = int(np.argmax(np.abs(diff)))
        why = (
            "the load generator fell behind (short of CPU?)"
            if diff[worst] < 0
            else "requests outlasted a fall of the curve (users finish theirs before they stop)"
        )
        text = (
            f"curve replay did NOT follow the log: in flight off by RMS {rms:.2f} per window "
            f"({pct:.1f} % of its {top:.3g} peak; window {worst}: {measured[worst]:.1f} measured "
            f"for {planned[worst]:.1f} planned: {why}), so this run shows the traffic it sent, "
            "not the log's"
        )
    return Tracking(len(planned), tuple(planned), tuple(measured), rms, peak, pct, followed, text)


@dataclass(frozen=True)
class ReplayBreak:
    scales: tuple[float, ...]  # the scales replayed (all planned; some may not have run)
    held: tuple[float, ...]  # scales whose every window was before the knee
    breaking_scale: float | None  # None: no window was past the knee
    stage: int | None
    log_start_s: float | None  # the breaking window's log span
    log_end_s: float | None
    users: int | None
    verdict: str | None
    text: str


def _clock(t: float, origin: float) -> str:
    """A log time as a time of day (UTC) for unix times, else as minutes from the start."""
    if t > 1e8:
        return datetime.fromtimestamp(t, tz=UTC).strftime("%H:%M UTC")
    return f"minute {math.floor((t - origin) / 60)}"


def replay_break(analysis: Analysis, capacity: Capacity | None = None) -> ReplayBreak | None:
    """The measured breaking scale of a curve-replay run (see the module docstring)."""
    curve: Any = analysis.run.run_info.get("curve")
    if not isinstance(curve, dict) or not curve.get("windows"):
        return None
    windows = {int(w["stage"]): w for w in curve["windows"]}
    scales = tuple(float(s) for s in curve.get("scales", ()))
    verdicts = {v.stage: v for v in analysis.knee.stages}
    allowed = capacity.users if capacity is not None and capacity.kind != "tested" else None
    broken = None
    for stage in sorted(verdicts):
        v, w = verdicts[stage], windows.get(stage)
        if w is None:
            continue
        over = allowed is not None and v.target_users > allowed
        if v.verdict in PAST or over:
            broken = (v, w)
            break
    ran = {float(windows[s]["scale"]) for s in verdicts if s in windows}
    if broken is None:
        held = tuple(s for s in scales if s in ran)
        top = f"×{max(held):g}" if held else "none"
        text = f"curve replay: no window past the knee up to scale {top}"
        return ReplayBreak(scales, held, None, None, None, None, None, None, text)
    v, w = broken
    scale = float(w["scale"])
    held = tuple(
        s for s in scales if s in ran and s != scale and scales.index(s) < scales.index(scale)
    )
    origin = float(curve.get("log_origin_s", w["log_start_s"]))
    when = _clock(float(w["log_start_s"]), origin)
    why = v.verdict if v.verdict in PAST else f"{v.target_users} users, above {allowed}"
    text = (
        f"curve replay: traffic ×{scale:g} breaks first, at {when} of the log "
        f"(window {v.stage}, {v.target_users} users: {why})"
    )
    if held:
        text += f"; ×{max(held):g} held"
    return ReplayBreak(
        scales, held, scale, v.stage, float(w["log_start_s"]), float(w["log_end_s"]),
        v.target_users, v.verdict, text,
    )  # fmt: skip
