"""The single-user baseline: the yardstick every later stage is compared against.

It is measured with one request at a time, one warm-up discarded, then 20 or more measured
runs, and keeps the median (the usual case) and P95 (the tail) of the end-to-end latency and of
the seconds per 1000 tokens, on total tokens and on completion tokens. When P95 and the median are
far apart (default: P95 > 1.5× the median) something outside the test interfered (another process
on the GPU, network jitter, log flushing) and the sweep should not be trusted until it is cleaned
up. Where the baseline's own requests differ in length by more than that (a replayed log's mix:
their P95 over P5 of prompt or completion tokens), e2e and seconds per 1k tokens spread with the
lengths, so the check reads the decode time per token (TPOT) alone: a lognormal mix's baseline
on a quiet simulator read e2e 1.75× and seconds per 1k tokens 2.12× its median, its TPOT ~1.0×.
A run without a baseline stage falls back to its first step stage, marked as such, whose
throughput is divided by its users to stand in for the single-user rate. Each warning is a
:class:`BaselineNote` (its words: :func:`analysis.report.stage_words.baseline_note_text`).
"""

from __future__ import annotations

import pandas as pd

from analysis.inputs.load import Run
from analysis.model import Baseline, BaselineNote, SpreadFigure
from analysis.stages.summary import measured_requests, yardstick_stage
from loadknee_core.numeric import num

#: default limit on P95 / median before the baseline is called noisy (method: Baseline spread)
SPREAD_LIMIT = 1.5
#: the baseline needs at least this many measured baseline requests
MIN_REQUESTS = 20


def _pick_row(summary: pd.DataFrame) -> tuple[pd.Series | None, str]:
    """The yardstick's row: the stage :func:`~analysis.stages.summary.yardstick_stage` picks,
    the one the slowdown's single-user line is fitted on too."""
    indexed = summary.set_index("stage", drop=False)
    stage = yardstick_stage(indexed["kind"], pd.to_numeric(indexed["ok"], errors="coerce"))
    if stage is None:
        return None, "none"
    row = summary.iloc[int((summary["stage"] == stage).to_numpy().argmax())]
    return row, "baseline" if row["kind"] == "baseline" else "first_stage"


def _p95_per_1k(ok: pd.DataFrame | None) -> tuple[float | None, float | None]:
    """P95 of seconds per 1k total / completion tokens from the raw rows (None without rows)."""
    if ok is None:
        return None, None
    total = ok["prompt_tokens"] + ok["completion_tokens"]
    per_total = (ok["e2e_ms"] / total.where(total > 0)).quantile(0.95)
    per_completion = (
        ok["e2e_ms"] / ok["completion_tokens"].where(ok["completion_tokens"] > 0)
    ).quantile(0.95)
    return num(per_total), num(per_completion)


def lengths_vary(rows: pd.DataFrame | None, limit: float = SPREAD_LIMIT) -> bool:
    """Whether ``rows`` differ in length by more than the spread limit (P95 over P5 of the
    prompt or the completion tokens): a replayed log's mix, whose e2e and even its seconds per
    1k tokens spread with the lengths, not with interference. ``loadknee predict --check``
    predicts such a run at its rows' mix (:func:`analysis.predict.check.measured_run`)."""
    if rows is None or rows.empty:
        return False
    for column in ("prompt_tokens", "completion_tokens"):
        tokens = pd.to_numeric(rows[column], errors="coerce").dropna()
        tokens = tokens[tokens > 0]
        if len(tokens) and tokens.quantile(0.95) > limit * tokens.quantile(0.05):
            return True
    return False


def _tpot(rows: pd.DataFrame | None) -> tuple[float | None, float | None]:
    """Median and P95 of the requests' decode time per token after the first (None: none)."""
    if rows is None or "tpot_ms" not in rows:
        return None, None
    tpot = pd.to_numeric(rows["tpot_ms"], errors="coerce").dropna()
    if tpot.empty:
        return None, None
    return num(tpot.median()), num(tpot.quantile(0.95))


def _baseline_rows(
    run: Run | None, stage: int, measured: pd.DataFrame | None
) -> pd.DataFrame | None:
    """The baseline stage's ok measured rows (None without the run's rows)."""
    if run is None:
        return None
    rows = measured_requests(run) if measured is None else measured
    return rows[(rows["stage"] == stage) & (rows["cls"] == "ok")]


def _spread_warning(
    figure: SpreadFigure, p50: float | None, p95: float | None, limit: float
) -> BaselineNote | None:
    if p50 is None or p95 is None or p50 <= 0 or p95 / p50 <= limit:
        return None
    return BaselineNote("spread", figure=figure, p50=p50, p95=p95, limit_ratio=limit)


def compute_baseline(
    run: Run | None,
    summary: pd.DataFrame,
    *,
    spread_limit: float = SPREAD_LIMIT,
    min_requests: int = MIN_REQUESTS,
    measured: pd.DataFrame | None = None,
) -> Baseline:
    """Baseline from the baseline stage of ``summary`` (or its first step stage when none).

    ``run`` supplies the raw rows for the P95 of seconds per 1k tokens; without it (a record table
    typed in by hand) those two fields are None and everything else comes from ``summary``;
    ``measured``: the run's :func:`~analysis.stages.summary.measured_requests`, when already at
    hand.
    """
    row, source = _pick_row(summary)
    if row is None:
        return Baseline(
            source="none",
            requests=0,
            e2e_p50_ms=None,
            e2e_p95_ms=None,
            ttft_p50_ms=None,
            ttft_p95_ms=None,
            s_per_1k_total_p50=None,
            s_per_1k_total_p95=None,
            s_per_1k_completion_p50=None,
            s_per_1k_completion_p95=None,
            output_tok_s=None,
            warnings=(BaselineNote("no_baseline"),),
        )
    stage = int(row["stage"])
    users = int(row["target_users"]) if not pd.isna(row["target_users"]) else 1
    ok_rows = _baseline_rows(run, stage, measured)
    p95_total, p95_completion = _p95_per_1k(ok_rows)
    if p95_total is None:  # a typed-in table: the summary may still carry it
        p95_total = num(row.get("s_per_1k_total_p95"))
    e2e_p50, e2e_p95 = num(row["e2e_p50_ms"]), num(row["e2e_p95_ms"])
    per1k_p50 = num(row["s_per_1k_total_tokens"])
    warnings = []
    if source == "first_stage":
        warnings.append(BaselineNote("first_stage", users=users))
    if int(row["ok"]) < min_requests:
        warnings.append(
            BaselineNote("few_requests", requests=int(row["ok"]), min_requests=min_requests)
        )
    figures: tuple[tuple[SpreadFigure, float | None, float | None], ...] = (
        ("e2e_ms", e2e_p50, e2e_p95),
        ("s_per_1k", per1k_p50, p95_total),
    )
    tpot_p50, tpot_p95 = _tpot(ok_rows)
    if lengths_vary(ok_rows, spread_limit) and tpot_p50 is not None:
        # a mix: only the decode step says whether something interfered
        figures = (("tpot_ms", tpot_p50, tpot_p95),)
    spread = [_spread_warning(what, p50, p95, spread_limit) for what, p50, p95 in figures]
    spread_warnings = [note for note in spread if note is not None]
    warnings += spread_warnings
    tok_s = num(row["output_tok_s"])
    return Baseline(
        source=source,  # type: ignore[arg-type]
        requests=int(row["ok"]),
        e2e_p50_ms=e2e_p50,
        e2e_p95_ms=e2e_p95,
        ttft_p50_ms=num(row["ttft_p50_ms"]),
        ttft_p95_ms=num(row["ttft_p95_ms"]),
        s_per_1k_total_p50=per1k_p50,
        s_per_1k_total_p95=p95_total,
        s_per_1k_completion_p50=num(row["s_per_1k_completion_tokens"]),
        s_per_1k_completion_p95=p95_completion,
        output_tok_s=None if tok_s is None else tok_s / max(users, 1),
        warnings=tuple(warnings),
        e2e_p99_ms=num(row["e2e_p99_ms"]),
        stage=stage,
        target_users=users,
        s_per_1k_total_p99=num(row.get("s_per_1k_total_p99")),
        slowdown_p95=num(row.get("slowdown_p95")),
        slowdown_p99=num(row.get("slowdown_p99")),
        interference_suspected=bool(spread_warnings),
    )
