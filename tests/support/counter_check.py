"""Each stage's token figures beside the server's own token counter, for the real-engine and
simulator checks (``tests/e2e/test_verify_sim.py``,
``tests/realengine/test_realengine_llamacpp.py``).

Two servers count differently. vLLM (and the simulator) add to ``vllm:generation_tokens_total``
as tokens are generated, so the counter's increase between two scrapes is the tokens generated
between their stamps, and the record table's own rule (``analysis.stages.summary.window_rates``:
each request's tokens spread over its generation) applied to that same span must give the same
rate (``table_tok_s_aligned`` against ``server_tok_s_aligned``). The counter interpolated at the
window's own edges (compared until ci45) assumes it grew evenly between the scrapes around each
edge: on a starved machine the simulator's steps come in bursts and that guess moved the
reference 3 % (ci45: 287 tok/s interpolated, 281 over the scrapes, the rows' 1,536 tokens ending
there against the counter's 1,532). llama-server adds a request's tokens to
``llamacpp:tokens_predicted_total`` only when its slot is released, in one jump: over a window
whose end is, by construction, the moment a stage's last counted request finished, the
interpolated counter misses or halves those jumps. For it the window is widened to the scrape
samples around it, and what is compared is exact: the completion tokens of the rows that ended
between those samples against the counter's increase between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.inputs.load import read_run
from analysis.pipeline import analyze_run
from analysis.stages.summary import measured_requests, stage_windows, window_rates


@dataclass(frozen=True)
class StageCount:
    stage: int
    kind: str
    users: int
    output_tok_s: float  # the record table's figure
    aligned_s: float  # the window widened to the scrapes around it
    server_tok_s_aligned: float
    #: the record table's rule (each request's tokens spread over its generation) over the
    #: aligned window: what the counter's increase over that window counts
    table_tok_s_aligned: float
    server_tokens_aligned: float  # the counter's increase between those scrapes
    row_tokens_aligned: float  # completion tokens of the rows that ended between them
    #: completion tokens of the rows that ended within one engine step (the stage's median ITL)
    #: of either scrape: a row the client saw end just before a scrape's stamp may be counted
    #: by the server only after it (ci25: four requests of one batch, 7-9 ms before the stamp)
    edge_tokens: float


def _table_rate(rows: pd.DataFrame, stage: int, t_a: float, t_b: float) -> float:
    """The stage's completion tokens/s over ``[t_a, t_b]`` by the record table's own rule."""
    span = pd.DataFrame({"window_start": [t_a], "window_end": [t_b]}, index=pd.Index([stage]))
    return float(window_rates(rows, span)["output_tok_s"].iloc[0])


def stage_counts(run_dir: Path, metric: str) -> list[StageCount]:
    run = read_run(run_dir)
    summary = analyze_run(run_dir).summary.set_index("stage")
    windows = stage_windows(run, measured_requests(run))
    samples = run.server_metrics[run.server_metrics["metric"] == metric]
    samples = samples.dropna(subset=["value"]).sort_values("timestamp_unix_s")
    assert len(samples) > 20, f"the server's {metric} was not scraped"
    ts, vs = samples["timestamp_unix_s"].to_numpy(), samples["value"].to_numpy(dtype=float)
    rows = run.requests
    out = []
    for stage, row in summary.iterrows():
        start, end = (float(x) for x in windows.loc[stage, ["window_start", "window_end"]])
        before = max(int(np.searchsorted(ts, start, side="right")) - 1, 0)
        after = min(int(np.searchsorted(ts, end, side="left")), len(ts) - 1)
        t_a, t_b = float(ts[before]), float(ts[after])
        ended = rows[(rows["end_unix_s"] > t_a) & (rows["end_unix_s"] <= t_b)]
        step_s = float(row.get("itl_p50_ms", np.nan)) / 1000.0
        near = ((rows["end_unix_s"] - t_a).abs() <= step_s) | (
            (rows["end_unix_s"] - t_b).abs() <= step_s
        )
        out.append(
            StageCount(
                stage=int(stage),
                kind=str(row["kind"]),
                users=int(row["target_users"]),
                output_tok_s=float(row["output_tok_s"]),
                aligned_s=t_b - t_a,
                server_tok_s_aligned=float(vs[after] - vs[before]) / (t_b - t_a),
                table_tok_s_aligned=_table_rate(rows, int(stage), t_a, t_b),
                server_tokens_aligned=float(vs[after] - vs[before]),
                row_tokens_aligned=float(ended["completion_tokens"].fillna(0).sum()),
                edge_tokens=float(rows.loc[near, "completion_tokens"].fillna(0).sum()),
            )
        )
    return out
