"""summarize_stages: measured window only, exact percentiles (numpy as the oracle), telemetry."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.inputs.load import read_run
from analysis.model import SUMMARY_COLUMNS
from analysis.pipeline import MEASURED_COLUMNS
from analysis.stages.row_classes import CLASSES, class_codes
from analysis.stages.summary import (
    CLIENT_LAG_FIGURES,
    measured_codes,
    measured_requests,
    summarize_stages,
    window_places,
    window_rates,
)
from tests.support.knee_rundir import request_row, stage_row, write_run

T0 = 1_700_000_000.0
RNG = np.random.default_rng(7)
BASE_E2E = RNG.uniform(200, 300, 20)
STEP_E2E = RNG.lognormal(6, 0.5, 200)


def _run(tmp_path, *, gpu=None, server_metrics=None, client=None):
    stages = [
        stage_row(0, 1, T0, kind="baseline", warmup_s=1.0, measure_s=10.0),
        stage_row(1, 8, T0 + 20, warmup_s=2.0, measure_s=20.0),
        stage_row(2, 16, T0 + 50, warmup_s=2.0, measure_s=20.0),  # served nothing
    ]
    rows, n = [], 0
    rows.append(request_row(n, 0, T0 + 0.1, 850.0, phase="warmup"))  # discarded warm-up
    for i, e2e in enumerate(BASE_E2E):
        n += 1
        rows.append(request_row(n, 0, T0 + 1.0 + i * 0.4, e2e, phase="baseline"))
    for i, e2e in enumerate(STEP_E2E):
        n += 1
        rows.append(request_row(n, 1, T0 + 22.0 + i * 0.09, e2e, completion_tokens=40 + i % 20,
                                ttft_ms=e2e / 10, tpot_ms=5 + i % 3, itl_p50_ms=4 + i % 2,
                                itl_p95_ms=9 + i % 4))  # fmt: skip
    extra = [  # measured but excluded from the statistics, and outside the window
        ("length_mismatch", "measure", 99999.0),
        ("http_error", "measure", 1.0),
        ("timeout", "measure", 30000.0),
        ("cancelled", "measure", 45000.0),  # our own stop cut it: counted nowhere
        ("ok", "warmup", 77777.0),
        ("ok", "cooldown", 88888.0),
    ]
    for outcome, phase, e2e in extra:
        n += 1
        start = T0 + (20.5 if phase == "warmup" else 43.0 if phase == "cooldown" else 30.0)
        rows.append(request_row(n, 1, start, e2e, phase=phase, outcome=outcome))
    for _ in range(3):
        n += 1
        rows.append(request_row(n, 2, T0 + 53.0, 10.0, outcome="connect_error"))
    return read_run(write_run(tmp_path / "run", stages=stages, requests=rows, gpu=gpu,
                              server_metrics=server_metrics, client=client))  # fmt: skip


def test_columns_and_counts(tmp_path):
    summary = summarize_stages(_run(tmp_path))
    assert tuple(summary.columns) == SUMMARY_COLUMNS
    step = summary.iloc[1]
    assert (step["requests"], step["ok"], step["errors"], step["length_mismatch"]) == (
        203,
        200,
        2,
        1,
    )
    assert step["success_pct"] == pytest.approx(100 * 200 / 202)
    assert step["window_s"] == 20.0
    assert summary.iloc[0]["ok"] == 20  # baseline rows only, the warm-up request left out


def test_percentiles_are_exact_from_raw_rows(tmp_path):
    summary = summarize_stages(_run(tmp_path))
    step, base = summary.iloc[1], summary.iloc[0]
    expected = np.percentile(STEP_E2E, [50, 95, 99])  # numpy's default: linear
    assert [step["e2e_p50_ms"], step["e2e_p95_ms"], step["e2e_p99_ms"]] == pytest.approx(expected)
    assert step["e2e_mean_ms"] == pytest.approx(STEP_E2E.mean())
    assert step["ttft_p95_ms"] == pytest.approx(np.percentile(STEP_E2E / 10, 95))
    assert base["e2e_p95_ms"] == pytest.approx(np.percentile(BASE_E2E, 95))
    tpot = np.array([5 + i % 3 for i in range(200)])
    assert step["tpot_p95_ms"] == pytest.approx(np.percentile(tpot, 95))
    assert step["itl_p95_ms"] == pytest.approx(np.percentile([9 + i % 4 for i in range(200)], 95))


def test_seconds_per_1k_tokens_on_total_and_completion(tmp_path):
    step = summarize_stages(_run(tmp_path)).iloc[1]
    completion = np.array([40 + i % 20 for i in range(200)])
    per_total = STEP_E2E / 1000 / (100 + completion) * 1000
    per_completion = STEP_E2E / 1000 / completion * 1000
    assert step["s_per_1k_total_tokens"] == pytest.approx(np.median(per_total))
    assert step["s_per_1k_completion_tokens"] == pytest.approx(np.median(per_completion))
    assert step["s_per_1k_total_p95"] == pytest.approx(np.percentile(per_total, 95))
    assert step["s_per_1k_total_p99"] == pytest.approx(np.percentile(per_total, 99))


def test_rates_over_the_measured_window(tmp_path):
    summary = summarize_stages(_run(tmp_path))
    base = summary.iloc[0]  # every baseline request lies inside its 10 s window
    assert base["qps"] == pytest.approx(20 / 10.0)
    assert base["output_tok_s"] == pytest.approx(20 * 50 / 10.0)
    assert base["total_tok_s"] == pytest.approx(20 * 150 / 10.0)
    failed = summary.iloc[2]
    assert failed["success_pct"] == 0.0 and failed["qps"] == 0.0
    assert math.isnan(failed["e2e_p50_ms"])


def test_window_rates_count_a_request_half_inside_as_half():
    requests = pd.DataFrame({
        "stage": [1.0, 1.0, 1.0], "start_unix_s": [0.0, 9.0, 4.0], "end_unix_s": [2.0, 11.0, 5.0],
        "ttft_ms": [np.nan, np.nan, np.nan], "prompt_tokens": [10.0] * 3,
        "completion_tokens": [100.0] * 3, "outcome": ["ok"] * 3, "length_ok": [1.0] * 3,
    })  # fmt: skip
    windows = pd.DataFrame({"window_start": [1.0], "window_end": [10.0]}, index=[1])
    rates = window_rates(requests, windows).loc[1]
    assert rates["qps"] == pytest.approx((0.5 + 0.5 + 1.0) / 9.0)
    assert rates["output_tok_s"] == pytest.approx(200.0 / 9.0)


def test_missing_telemetry_is_nan_not_zero(tmp_path):
    step = summarize_stages(_run(tmp_path)).iloc[1]
    for name in ("gpu_mem_peak_pct", "gpu_util_mean_pct", "kv_cache_peak_pct", "waiting_mean",
                 "preemptions", "client_cpu_peak_pct", "gpu_idle_pct", "client_lag_p95_ms",
                 "host_load_1m"):  # fmt: skip
        assert math.isnan(step[name]), name


def _gpu(ts, used, util, sm=None):
    return {"timestamp_unix_s": ts, "gpu_index": 0, "source": "nvml", "memory_used_mib": used,
            "memory_total_mib": 1000.0, "gpu_util_pct": util, "sm_util_pct": sm}  # fmt: skip


def _metric(ts, name, value, labels='model_name="m"'):
    return {"timestamp_unix_s": ts, "endpoint": "http://h/metrics", "metric": name,
            "labels": labels, "value": value}  # fmt: skip


def test_telemetry_is_cut_to_the_window(tmp_path):
    gpu = [_gpu(T0 + 21, 990.0, 100.0),  # warm-up: outside
           _gpu(T0 + 25, 500.0, 80.0, 30.0), _gpu(T0 + 30, 700.0, 0.0, 50.0),
           _gpu(T0 + 35, 600.0, 100.0, 40.0)]  # fmt: skip
    metrics = []
    for ts, kv, waiting, running, preempt in (
        (T0 + 21, 0.99, 50, 9, 0),  # outside
        (T0 + 25, 0.40, 2, 8, 3),
        (T0 + 30, 0.60, 4, 8, 5),
        (T0 + 33, 0.50, 6, 7, 1),  # reset
        (T0 + 40, 0.55, 0, 8, 2),
    ):
        metrics += [_metric(ts, "vllm:kv_cache_usage_perc", kv),
                    _metric(ts, "vllm:num_requests_waiting", waiting),
                    _metric(ts, "vllm:num_requests_running", running),
                    _metric(ts, "vllm:num_preemptions_total", preempt)]  # fmt: skip
    client = [{"timestamp_unix_s": T0 + 30, "worker": "local", "cpu_pct": 45.0},
              {"timestamp_unix_s": T0 + 60, "worker": "local", "cpu_pct": 99.0}]  # fmt: skip
    step = summarize_stages(_run(tmp_path, gpu=gpu, server_metrics=metrics, client=client)).iloc[1]
    assert step["gpu_mem_peak_pct"] == pytest.approx(70.0)
    assert step["gpu_util_mean_pct"] == pytest.approx(60.0)
    assert step["sm_util_mean_pct"] == pytest.approx(40.0)
    assert step["gpu_idle_pct"] == pytest.approx(100 / 3)
    assert step["kv_cache_peak_pct"] == pytest.approx(60.0)
    assert step["waiting_mean"] == pytest.approx(3.0)
    assert (step["waiting_max"], step["running_max"]) == (6.0, 8.0)
    assert step["preemptions"] == pytest.approx(2 + 1)  # 3→5, reset to 1, 1→2
    assert step["client_cpu_peak_pct"] == 45.0
    assert math.isnan(summarize_stages(_run(tmp_path / "b")).iloc[1]["kv_cache_peak_pct"])


def _lag(ts, worker, lag_ms, load, cpus):
    return {"timestamp_unix_s": ts, "worker": worker, "cpu_pct": 10.0, "loop_lag_max_ms": lag_ms,
            "loop_lag_mean_ms": lag_ms / 4, "host_load_1m": load, "host_cpus": cpus}  # fmt: skip


def test_client_lag_is_cut_to_the_window_over_every_sending_worker(tmp_path):
    """The lag's mean (of the rows' means), P95 and max (of the rows' largest) over every
    sending process's rows in the window, the master's left out (it sends nothing); the host
    figures of the row with the most load per CPU (a 4-core worker at 6 is busier than an
    8-core one at 10)."""
    client = [_lag(T0 + 21, "0", 900.0, 40.0, 2),  # warm-up: outside
              *(_lag(T0 + 23 + i, "0", 2.0 + i, 6.0, 4) for i in range(10)),
              *(_lag(T0 + 23.5 + i, "1", 1.0, 10.0, 8) for i in range(9)),
              _lag(T0 + 35, "1", 120.0, 10.0, 8),
              _lag(T0 + 30, "master", 400.0, 30.0, 2)]  # fmt: skip
    step = summarize_stages(_run(tmp_path, client=client)).iloc[1]
    lags = [2.0 + i for i in range(10)] + [1.0] * 9 + [120.0]
    assert step["client_lag_mean_ms"] == pytest.approx(np.mean(lags) / 4)
    assert step["client_lag_p95_ms"] == pytest.approx(np.percentile(lags, 95))
    assert step["client_lag_max_ms"] == 120.0
    assert (step["host_load_1m"], step["host_cpus"]) == (6.0, 4.0)


def test_client_csv_from_before_the_lag_columns_reads_and_gives_nan(tmp_path):
    run_dir = tmp_path / "old"
    _run(run_dir)
    (run_dir / "run" / "client.csv").write_text(
        f"timestamp_unix_s,worker,cpu_pct,memory_mib,users\n{T0 + 30},local,45.0,80.0,8\n"
    )
    step = summarize_stages(read_run(run_dir / "run")).iloc[1]
    assert step["client_cpu_peak_pct"] == 45.0
    for name in CLIENT_LAG_FIGURES:
        assert math.isnan(step[name]), name


def test_summary_does_not_mutate_the_run(tmp_path):
    run = _run(tmp_path)
    before = run.requests.copy()
    summarize_stages(run)
    pd.testing.assert_frame_equal(run.requests, before)


def test_killed_run_window_closes_at_the_last_request_and_empty_stage_is_nan(tmp_path):
    stages = [stage_row(0, 2, T0, warmup_s=1.0), stage_row(1, 4, T0 + 20)]
    stages[0]["measure_end_unix_s"] = stages[0]["end_unix_s"] = None  # killed mid-stage
    rows = [request_row(i, 0, T0 + 1 + i, 500.0) for i in range(4)]  # last ends at T0 + 4.5
    run = read_run(write_run(tmp_path / "run", stages=stages, requests=rows))
    summary = summarize_stages(run)
    assert summary.iloc[0]["window_s"] == pytest.approx(3.5)
    assert summary.iloc[0]["qps"] == pytest.approx(4 / 3.5)
    empty = summary.iloc[1]
    assert empty["requests"] == 0 and math.isnan(empty["success_pct"])
    assert math.isnan(empty["qps"]) and math.isnan(empty["output_tok_s"])


def test_resent_requests_are_counted_per_stage_and_shown_in_the_table(tmp_path):
    """A resend (a request sent again after its reused socket was found closed) is visible per
    stage; a file written before the ``resent`` column reads as "not recorded", not as zero."""
    from analysis.report.table import format_markdown, record_frame

    stages = [stage_row(0, 2, T0), stage_row(1, 4, T0 + 20)]
    rows = [request_row(i, 0, T0 + 1 + i * 0.5, 300.0, resent=0) for i in range(10)]
    rows += [request_row(10 + i, 1, T0 + 21 + i * 0.5, 300.0, resent=int(i < 3))
             for i in range(10)]  # fmt: skip
    summary = summarize_stages(read_run(write_run(tmp_path / "new", stages=stages, requests=rows)))
    assert summary["resent"].tolist() == [0, 3]
    lines = format_markdown(record_frame(summary, None)).splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    at = cells[0].index("resent")
    assert [row[at] for row in cells[2:4]] == ["-", "3"], "\n".join(lines)

    old = write_run(tmp_path / "old", stages=stages, requests=rows)
    frame = pd.read_csv(old / "requests.csv").drop(columns=["resent"])
    frame.to_csv(old / "requests.csv", index=False)
    before = summarize_stages(read_run(old))
    assert before["resent"].isna().all() and before["ok"].tolist() == [10, 10]


def test_measured_rows_are_the_measured_phases_with_their_class(tmp_path):
    run = _run(tmp_path)
    measured = measured_requests(run)
    want = run.requests[run.requests["phase"].isin(("measure", "baseline"))]
    assert measured.index.tolist() == want.index.tolist()
    classes = class_codes(want["outcome"], want["length_ok"])
    assert measured["cls"].astype(str).tolist() == [CLASSES[c] for c in classes]
    assert (measured["cls"] == "cancelled").sum() == 1
    assert (measured["cls"] == "error").sum() == 5  # http_error, timeout, 3 connect_error
    # the codes come back from the column, not from classifying the rows again
    assert [measured["cls"].cat.categories[c] for c in measured_codes(measured)] == measured[
        "cls"
    ].astype(str).tolist()
    plain = measured.assign(cls=measured["cls"].astype(str))  # a cls column of names
    np.testing.assert_array_equal(measured_codes(plain), measured_codes(measured))


def test_measured_rows_with_only_the_columns_asked_for(tmp_path):
    run = _run(tmp_path)
    full = measured_requests(run)
    some = measured_requests(run, ("stage", "e2e_ms", "stage", "not_a_column"))
    assert list(some.columns) == ["stage", "e2e_ms", "cls"]  # once each, absent ones left out
    pd.testing.assert_frame_equal(some, full[["stage", "e2e_ms", "cls"]])
    # the analysis' own selection gives the record table every column would
    pd.testing.assert_frame_equal(
        summarize_stages(run, measured=measured_requests(run, MEASURED_COLUMNS)),
        summarize_stages(run, measured=full),
        check_exact=True,
    )


@pytest.mark.parametrize(
    ("stages", "rows", "places"),
    [
        ([0, 1, 2], [2.0, 0.0, 1.0, 3.0, np.nan], [2, 0, 1, -1, -1]),
        ([5.0, 1.0, 3.0], [1, 3, 5, 4, 0, 6], [1, 2, 0, -1, -1, -1]),  # stages unsorted
        ([], [1.0, 2.0], [-1, -1]),
        ([7], [], []),
    ],
)
def test_window_places_find_each_rows_stage(stages, rows, places):
    got = window_places(pd.Index(stages), np.array(rows, dtype=float))
    assert got.tolist() == places
    known = pd.Index(stages).get_indexer(pd.Index(rows, dtype=float))  # the hash it replaces
    assert got.tolist() == known.tolist()
