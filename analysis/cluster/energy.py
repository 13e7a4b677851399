"""Energy per stage: mean board power, output tokens per joule, and users per kW at the knee.

Power comes from the run's GPU samples, ``power_w`` of ``gpu.csv`` (NVML's
``nvmlDeviceGetPowerUsage``, the DCGM exporter's ``DCGM_FI_DEV_POWER_USAGE``, or nvidia-smi's
``power.draw`` in a merged capture); a run whose ``gpu.csv`` has none is read from the raw DCGM
samples in ``server_metrics.csv`` instead. Per stage, over its measured window:

* **mean W** — the GPUs' draws summed at each sample time, then averaged over the window;
* **output tokens per joule** — the stage's output tok/s ÷ its mean W (tokens/s ÷ J/s);
* **users per kW** — the stage's concurrency ÷ its mean kW: written for the knee's stage and
  for ``max_concurrency``'s (the last one before the knee), the figure a capacity plan divides
  a power budget by.

A stage without power samples has NaN (never 0), and the whole table is empty when the run
carried no power reading at all (the reason is in :attr:`Energy.why`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from analysis.cluster.memo import per_analysis
from analysis.cluster.stages import answer, measured_windows, records
from analysis.cluster.yamlblock import Commented, dump
from analysis.inputs.server_metrics import gpu_from_dcgm
from analysis.pipeline import Analysis
from analysis.report.answer_view import answer_note, capacity_stage_words, knee_stage_words

#: the reason a run has no energy table: it carried no power reading
NO_POWER = "no power samples: gpu.csv has no power_w and no DCGM power was scraped"
COLUMNS = ("stage", "users", "power_mean_w", "output_tok_s", "output_tokens_per_j", "samples")


@dataclass(frozen=True)
class Energy:
    stages: pd.DataFrame  # COLUMNS
    source: str  # nvml | dcgm | nvidia-smi | "" (none)
    knee_users_per_kw: float | None
    max_concurrency_users_per_kw: float | None
    why: str = ""


def power_samples(analysis: Analysis) -> tuple[pd.DataFrame, str]:
    """(timestamp_unix_s, power_w summed over GPUs) per sample time, and the source's name."""
    for gpu in (analysis.run.gpu, None):
        if gpu is None:
            if analysis.run.server_metrics.empty:
                break
            gpu = gpu_from_dcgm(analysis.run.server_metrics)
        if gpu.empty or "power_w" not in gpu:
            continue
        rows = gpu.assign(power_w=pd.to_numeric(gpu["power_w"], errors="coerce"))
        rows = rows.dropna(subset=["power_w"])
        if rows.empty:
            continue
        source = str(rows["source"].dropna().iloc[0]) if rows["source"].notna().any() else ""
        summed = rows.groupby("timestamp_unix_s", sort=True)["power_w"].sum().reset_index()
        return summed, source
    return pd.DataFrame({"timestamp_unix_s": [], "power_w": []}), ""


@per_analysis
def energy(analysis: Analysis) -> Energy:
    """The energy table of one analysed run (see the module docstring)."""
    samples, source = power_samples(analysis)
    windows = measured_windows(analysis)[1]
    rows = []
    for row in records(analysis.summary):
        stage = int(row.stage)
        mean_w, count = math.nan, 0
        if not samples.empty and stage in windows.index:
            start, end = windows.loc[stage, "window_start"], windows.loc[stage, "window_end"]
            ts = samples["timestamp_unix_s"]
            inside = samples[(ts >= start) & (ts <= end)]["power_w"]
            count = len(inside)
            if count:
                mean_w = float(inside.mean())
        tok_s = float(row.output_tok_s)
        per_j = tok_s / mean_w if mean_w and not math.isnan(mean_w) and mean_w > 0 else math.nan
        rows.append(
            {
                "stage": stage,
                "users": int(row.target_users),
                "power_mean_w": mean_w,
                "output_tok_s": tok_s,
                "output_tokens_per_j": per_j,
                "samples": count,
            }
        )
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    # by users, as the record table reads (a refine stage runs after the level above it)
    table = table.sort_values(["users", "stage"], kind="stable", ignore_index=True)

    def per_kw(users: int | None) -> float | None:
        if users is None:
            return None
        match = table[(table["users"] == users) & table["power_mean_w"].notna()]
        if match.empty:
            return None
        return float(users / (match["power_mean_w"].iloc[-1] / 1000.0))

    view = answer(analysis)
    why = "" if source else NO_POWER
    knee_users = view.past_users if view.past == "knee" else None
    return Energy(table, source, per_kw(knee_users), per_kw(view.capacity), why)


def _r(value: float, digits: int = 4) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


def energy_yaml(analysis: Analysis) -> str:
    """The energy table as YAML (one entry per stage, then the per-kW figures)."""
    e = energy(analysis)
    doc = {
        "run_id": analysis.run_id,
        "power_source": e.source or None,
        "stages": [
            {
                "stage": int(r.stage),
                "users": int(r.users),
                "power_mean_w": _r(r.power_mean_w, 2),
                "output_tok_s": _r(r.output_tok_s, 2),
                "output_tokens_per_j": _r(r.output_tokens_per_j, 4),
                "samples": int(r.samples),
            }
            for r in records(e.stages)
        ],
        "knee_users_per_kw": Commented(
            None if e.knee_users_per_kw is None else round(e.knee_users_per_kw, 2),
            (knee_stage_words(answer(analysis)),),
        ),
        "max_concurrency_users_per_kw": Commented(
            None
            if e.max_concurrency_users_per_kw is None
            else round(e.max_concurrency_users_per_kw, 2),
            (capacity_stage_words(answer(analysis)),),
        ),
    }
    header = [
        f"loadknee energy per stage for run {analysis.run_id} (mean board power, all GPUs).",
        answer_note(answer(analysis)),
    ]
    if e.why:
        header.append(e.why)
    return dump(doc, header=header)
