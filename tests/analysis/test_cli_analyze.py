"""``loadknee analyze`` end to end on a synthetic contract-shaped run directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import analysis.report.writer
from analysis.cli import main
from analysis.cluster.emit import CLUSTER_ENTRIES
from analysis.pipeline import analyze_run
from analysis.report.knee_json import from_json
from analysis.report.writer import REPORT_FILES, collect_warnings, report_paths, write_report
from tests.support.kept_out import imports_brought
from tests.support.report_fixtures import (
    SECRET,
    no_global_figures,  # noqa: F401 (autouse fixture)
    write_run_dir,
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return write_run_dir(tmp_path_factory.mktemp("runs") / "run-a")


@pytest.fixture(scope="module")
def analysed(run_dir, tmp_path_factory):
    """Run the CLI once for the module (plots take a second or two on a busy machine)."""
    out = tmp_path_factory.mktemp("report")
    capture = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "analyze", str(run_dir), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return capture, out


def test_exit_code_files_and_printed_table(analysed) -> None:
    capture, out = analysed
    assert capture.returncode == 0, capture.stderr
    for name in REPORT_FILES:
        assert (out / name).stat().st_size > 0, name
    stdout = capture.stdout
    lines = stdout.splitlines()
    assert f"report: {out / 'report.html'}" in lines
    assert lines[0].startswith("DEPLOY: ")  # the one answer comes first, and only there
    assert stdout.count("DEPLOY") == 1
    start = next(i for i, line in enumerate(lines) if line.startswith("run "))
    header, table = lines[start + 1].split(), lines[start + 1 :]
    assert header[:1] == ["users"] and "P99" in header and header[-1] == "verdict"
    assert [ln.split()[0] for ln in table[2:8]] == ["1", "1", "2", "4", "8", "16"]
    assert max(len(line) for line in lines) <= 100
    assert "[analyze]" in capture.stderr and "[analyze]" not in stdout  # progress on stderr
    assert "Traceback" not in capture.stderr


def test_report_files_agree_with_each_other(analysed, run_dir) -> None:
    _, out = analysed
    doc = from_json((out / "knee.json").read_text())
    assert doc.run_id == "run-a"
    assert doc.knee is not None and len(doc.knee.stages) == 5
    record_csv = (out / "record.csv").read_text().splitlines()
    assert len(record_csv) == 1 + 6
    assert "| users |" in (out / "record.md").read_text()
    page = (out / "report.html").read_text()
    assert SECRET not in page
    for name in REPORT_FILES:
        assert SECRET not in (out / name).read_bytes().decode("latin-1")
    assert page.count("data:image/png;base64,") == 4  # latency, throughput, timeline, interactivity


def test_default_out_is_run_report_and_json_format(tmp_path, capsys) -> None:
    root = write_run_dir(tmp_path / "run-b", levels=(1, 2, 4), with_gpu=False)
    assert main([str(root), "--format", "json", "--quiet", "--knee-tail-ratio", "3"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["knee"]["params"]["tail_ratio"] == 3.0
    # --quiet hides progress, not that the run is judged otherwise than it recorded
    # words are the product: the warning a user reads when a flag overrides the run's threshold
    assert captured.err == "loadknee analyze: judged with --knee-tail-ratio 3.0 (the run's: 2.0)\n"
    listed = sorted(p.name for p in (root / "report").iterdir())
    assert listed == sorted(REPORT_FILES + CLUSTER_ENTRIES)  # --emit all by default


def test_markdown_format(tmp_path, capsys) -> None:
    root = write_run_dir(tmp_path / "run-c", levels=(1, 2), with_server_metrics=False)
    assert main([str(root), "--format", "markdown", "--quiet"]) == 0
    assert "|---:|" in capsys.readouterr().out


def test_missing_run_dir_exits_2_with_one_clear_line(tmp_path, capsys) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    # words are the product: the refusal a user reads for a bad run directory
    assert "no such run directory" in err and "nope" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_invalid_run_dir_lists_problems(tmp_path, capsys) -> None:
    root = write_run_dir(tmp_path / "run-d", levels=(1,))
    (root / "requests.csv").write_text("request_id,stage\nx,0\n")
    assert main([str(root)]) == 2
    err = capsys.readouterr().err
    assert "requests.csv" in err and "e2e_ms" in err


def test_the_answer_is_printed_before_the_report_files_are_written(
    run_dir, tmp_path, capsys, monkeypatch
) -> None:
    """The plots and the page take longer than the analysis: the answer does not wait on them,
    and the report line it prints names the files that are then written."""
    seen: dict[str, str] = {}

    def writing(*args, **kwargs):
        seen["stdout"] = capsys.readouterr().out  # what the terminal had when the files began
        return write_report(*args, **kwargs)

    monkeypatch.setattr(analysis.report.writer, "write_report", writing)
    out = tmp_path / "report"
    assert main([str(run_dir), "--out", str(out), "--quiet", "--explain"]) == 0
    assert seen["stdout"].startswith("DEPLOY: ") and f"{out}/: " in seen["stdout"]  # the files
    assert f"report: {out / 'report.html'}" in seen["stdout"].splitlines()
    assert capsys.readouterr().out == ""  # nothing after the answer on stdout
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == sorted(report_paths(analyze_run(run_dir), out))


def test_the_answer_does_not_import_matplotlib() -> None:
    """matplotlib takes about as long to import as pandas: only drawing the PNGs loads it."""
    modules = "analysis.cli,analysis.report.screen,analysis.report.writer,analysis.compare.cli"
    assert imports_brought(modules, "matplotlib") == []


def test_the_answer_does_not_import_the_report_writers() -> None:
    """The page, the cluster renderers and prometheus_client's parser (with http.server, ssl,
    email) load only once the answer is printed: the answer waits on no import it does not use
    (issue 38: the answer within 2× the pandas import)."""
    kept_out = "analysis.report.writer,analysis.report.html,analysis.cluster.emit,prometheus_client"
    assert imports_brought("analysis.cli", kept_out) == []


def test_analysis_never_imports_locust_or_gevent() -> None:
    modules = "analysis.cli,analysis.compare.cli,analysis.report.writer,analysis.report.plots"
    assert imports_brought(modules, "locust,gevent") == []


def _nvidia_smi_lines(root: Path) -> str:
    """A capture as the single-machine source prints it (no header, no units) covering the
    run, timestamps in UTC."""
    import datetime as dt

    import pandas as pd

    stages = pd.read_csv(root / "stages.csv")
    start, end = stages["start_unix_s"].min(), stages["end_unix_s"].max()
    lines, t = [], start
    while t <= end:
        stamp = dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        lines.append(f"{stamp}, 70000, 81920, 88")
        t += 0.5
    return "\n".join(lines) + "\n"


def test_nvidia_smi_capture_fills_the_memory_column(tmp_path, capsys) -> None:
    root = write_run_dir(tmp_path / "run-e", levels=(1, 2), with_gpu=False)
    capture = tmp_path / "smi.csv"
    capture.write_text(_nvidia_smi_lines(root))
    args = [str(root), "--nvidia-smi-csv", str(capture), "--nvidia-smi-tz", "UTC", "--quiet"]
    assert main([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["gpu_mem_peak_pct"] for row in data["summary"]] == [
        pytest.approx(100 * 70000 / 81920)
    ] * 3


@pytest.mark.parametrize("extra", [["--nvidia-smi-csv", "/nonexistent/smi.csv"],
                                   ["--nvidia-smi-tz", "Not/AZone"]])  # fmt: skip
def test_bad_nvidia_smi_arguments_exit_2(tmp_path, capsys, extra) -> None:
    root = write_run_dir(tmp_path / "run-f", levels=(1,), with_gpu=False)
    capture = tmp_path / "smi.csv"
    capture.write_text(_nvidia_smi_lines(root))
    args = [str(root), "--nvidia-smi-csv", str(capture), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "smi" in err.lower() or "zone" in err.lower()
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("stamps", "warning"),
    [
        ({"kernel": 900, "with_headers": 3}, None),
        ({"kernel": 890, "readline": 10}, "10 of 900 of the streams"),
        ({"readline": 1200}, "1,200 of 1,200 of the streams"),
    ],
)
def test_streams_stamped_after_the_read_are_a_warning(tmp_path, stamps, warning) -> None:
    info = {"prompt_source": {"kind": "fixed", "stream_stamps": stamps}}
    root = write_run_dir(tmp_path / "run-s", levels=(1, 2), run_info=info)
    found = [w for w in collect_warnings(analyze_run(root)) if "kernel's receive time" in w]
    assert found == [] if warning is None else warning in found[0]


def test_a_reader_that_closes_the_pipe_gets_no_traceback(run_dir, tmp_path) -> None:
    """`analyze --format json | head` ended in a BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "analysis.cli", str(run_dir), "--format", "json", "--quiet",
         "--out", str(tmp_path / "report")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before a byte is written: the write must fail
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert (tmp_path / "report" / "knee.json").is_file()  # the files were still written
