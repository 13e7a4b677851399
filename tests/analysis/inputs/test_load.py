"""read_run: contract validation with one error listing every defect, optional files, merging."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from analysis.inputs.load import RunDirError, read_run
from loadknee_core import contract
from tests.support.knee_rundir import request_row, stage_row, write_csv, write_run

T0 = 1_700_000_000.0


def _basic(tmp_path, **optional):
    stages = [stage_row(0, 1, T0, kind="baseline"), stage_row(1, 4, T0 + 20)]
    requests = [
        request_row(0, 0, T0 + 2, 100.0, phase="baseline"),
        request_row(1, 1, T0 + 22, 200.0, ttft_ms=None, completion_tokens=None),
    ]
    return write_run(tmp_path / "run", stages=stages, requests=requests, **optional)


def test_valid_run_reads_numeric_as_float_and_empty_as_nan(tmp_path):
    run = read_run(_basic(tmp_path))
    assert list(run.stages["stage"]) == [0, 1]
    assert run.requests["e2e_ms"].dtype == "float64"
    assert run.requests["stage"].dtype == "float64"
    row = run.requests.iloc[1]
    assert math.isnan(row["ttft_ms"]) and math.isnan(row["completion_tokens"])  # never 0
    assert run.requests["outcome"].tolist() == ["ok", "ok"]
    assert run.run_info == {"run_id": "test"}


def test_absent_optional_files_give_empty_frames_with_contract_columns(tmp_path):
    run = read_run(_basic(tmp_path))
    optional = (
        (run.gpu, contract.GPU_CSV),
        (run.server_metrics, contract.SERVER_METRICS_CSV),
        (run.client, contract.CLIENT_CSV),
    )
    for frame, name in optional:
        assert frame.empty
        assert tuple(frame.columns) == contract.CSV_COLUMNS[name]


def test_present_optional_files_are_read(tmp_path):
    gpu = [{"timestamp_unix_s": T0 + 1, "gpu_index": 0, "source": "nvml",
            "memory_used_mib": 100, "memory_total_mib": 1000}]  # fmt: skip
    run = read_run(_basic(tmp_path, gpu=gpu, client=[{"timestamp_unix_s": T0, "cpu_pct": 12}]))
    assert run.gpu["memory_used_mib"].tolist() == [100.0]
    assert math.isnan(run.gpu["gpu_util_pct"].iloc[0])
    assert run.client["cpu_pct"].tolist() == [12.0]


def test_client_csv_from_before_the_lag_columns_reads_with_them_empty(tmp_path):
    run_dir = _basic(tmp_path)
    old = ("timestamp_unix_s", "worker", "cpu_pct", "memory_mib", "users")
    write_csv(run_dir / contract.CLIENT_CSV, old, [{"timestamp_unix_s": T0, "cpu_pct": 12}])
    client = read_run(run_dir).client
    assert client["cpu_pct"].tolist() == [12.0]
    for name in ("loop_lag_max_ms", "loop_lag_mean_ms", "host_load_1m", "host_cpus"):
        assert client[name].isna().all(), name


def test_every_defect_is_listed_in_one_error(tmp_path):
    run_dir = _basic(tmp_path)
    (run_dir / contract.STAGES_CSV).unlink()
    requests = pd.read_csv(run_dir / contract.REQUESTS_CSV, dtype=str, keep_default_na=False)
    requests.loc[1, "e2e_ms"] = "fast"
    requests.loc[0, "phase"] = "lunch"
    requests.to_csv(run_dir / contract.REQUESTS_CSV, index=False)
    gpu_columns = [c for c in contract.GPU_COLUMNS if c != "memory_used_mib"]
    write_csv(run_dir / contract.GPU_CSV, gpu_columns, [])
    (run_dir / contract.RUN_JSON).write_text("{not json")
    with pytest.raises(RunDirError) as caught:
        read_run(run_dir)
    problems = "\n".join(caught.value.problems)
    assert len(caught.value.problems) == 4, problems
    # words are the product: the problems a user reads for a broken run directory
    assert "missing file stages.csv" in problems
    # words are the product: the problems a user reads for a broken run directory
    assert "'e2e_ms' must be numeric" in problems and "'fast'" in problems and "line 3" in problems
    assert "gpu.csv: missing column(s) memory_used_mib" in problems
    # words are the product: the problems a user reads for a broken run directory
    assert "run.json: not valid JSON" in problems
    assert str(run_dir) in str(caught.value)


def test_bad_vocabulary_is_reported(tmp_path):
    run_dir = _basic(tmp_path)
    requests = pd.read_csv(run_dir / contract.REQUESTS_CSV, dtype=str, keep_default_na=False)
    requests.loc[0, "phase"] = "lunch"
    requests.to_csv(run_dir / contract.REQUESTS_CSV, index=False)
    with pytest.raises(RunDirError, match=r"phase.*lunch"):
        read_run(run_dir)


def test_missing_directory_and_missing_requests(tmp_path):
    with pytest.raises(RunDirError, match="no such directory"):
        read_run(tmp_path / "nope")
    run_dir = _basic(tmp_path)
    (run_dir / contract.REQUESTS_CSV).unlink()
    with pytest.raises(RunDirError, match=r"requests\.csv \(nor any requests\.\*\.csv\)"):
        read_run(run_dir)


def test_per_worker_files_are_merged_and_duplicates_dropped(tmp_path):
    run_dir = _basic(tmp_path)
    merged = pd.read_csv(run_dir / contract.REQUESTS_CSV, dtype=str, keep_default_na=False)
    extra = [request_row(n, 1, T0 + 23 + n, 150.0) | {"request_id": f"w1-{n}", "worker": "1"}
             for n in range(3)]  # fmt: skip
    write_csv(run_dir / "requests.1.csv", contract.REQUEST_COLUMNS, extra)
    merged.to_csv(run_dir / "requests.0.csv", index=False)  # same rows as requests.csv
    run = read_run(run_dir)
    assert len(run.requests) == 5
    assert sorted(run.requests["request_id"]) == ["local-0", "local-1", "w1-0", "w1-1", "w1-2"]
    # words are the product: the note a user reads on what was read from their run directory
    assert any("merged 3 request files" in note for note in run.notes)


def test_nvidia_smi_capture_is_appended_to_gpu(tmp_path):
    run_dir = _basic(tmp_path)
    capture = tmp_path / "smi.csv"
    capture.write_text("2024/05/01 12:00:00.500, 10240, 81920, 35\n")
    run = read_run(run_dir, nvidia_smi_csv=capture, read_nvidia_smi=None)
    assert run.gpu["memory_used_mib"].tolist() == [10240.0]
    assert run.gpu["gpu_util_pct"].tolist() == [35.0]
    with pytest.raises(RunDirError, match="nvidia-smi file"):
        read_run(run_dir, nvidia_smi_csv=tmp_path / "missing.csv")


def test_run_json_must_be_an_object(tmp_path):
    run_dir = _basic(tmp_path)
    (run_dir / contract.RUN_JSON).write_text(json.dumps([1, 2]))
    with pytest.raises(RunDirError, match="one JSON object"):
        read_run(run_dir)


def test_unparseable_csv_is_reported_not_raised(tmp_path):
    run_dir = _basic(tmp_path)
    with (run_dir / contract.REQUESTS_CSV).open("a") as f:
        # a quote that never closes, on a complete line: corrupt, not merely cut by a kill
        f.write('local-9,1,measure,local,0,chat,1,1,1,2,3,,,,,,,,,,server,,,1,ok,200,"cut off\n')
    with pytest.raises(RunDirError, match=r"requests\.csv: could not be parsed as CSV"):
        read_run(run_dir)


def test_a_row_cut_by_a_killed_writer_is_dropped_and_noted(tmp_path):
    """SIGKILL mid-write leaves a partial last line (here inside a quoted field, which alone
    would make the CSV unparseable): the complete rows stay readable, the cut one is dropped."""
    metrics = [{"timestamp_unix_s": T0 + i, "endpoint": "http://h/metrics",
                "metric": "vllm:num_requests_waiting", "labels": 'model_name="m"', "value": i}
               for i in range(3)]  # fmt: skip
    run_dir = _basic(tmp_path, server_metrics=metrics)
    complete = read_run(run_dir)
    for name in ("requests.csv", "server_metrics.csv"):
        path = run_dir / name
        text = path.read_text()
        first_row = text.splitlines()[1]
        path.write_text(text + first_row[: len(first_row) // 2] + ',"k=""v')
    cut = read_run(run_dir)
    assert len(cut.requests) == len(complete.requests) == 2
    assert len(cut.server_metrics) == len(complete.server_metrics) == 3
    assert sum("partial last line" in n for n in cut.notes) == 2
