"""``loadknee predict --prompt-log``: a prompt log's length mix, read as replay reads it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from analysis.pipeline import analyze_run
from analysis.predict.cli import main
from analysis.predict.facts import Workload
from analysis.predict.fit import fit_capacity
from analysis.predict.mix import CHARS_PER_TOKEN, mix_workload, read_mix
from analysis.predict.whatif import predict
from tests.support.report_fixtures import write_run_dir


def _log(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture server whose KV budget bound it (128 + 32 tokens, 6 slots' worth)."""
    return write_run_dir(tmp_path_factory.mktemp("mix") / "run", slots=6)


def test_the_mix_is_the_mean_work_and_the_time_weighted_context() -> None:
    ins, outs = np.array([100.0, 300.0]), np.array([10.0, 30.0])
    w = mix_workload(ins, outs)
    assert (w.input_tokens, w.output_tokens) == (200.0, 20.0)
    # the 330-token request runs 30 steps, the 110-token one 10: the batch holds the long one
    # three quarters of the time
    assert w.context_tokens == pytest.approx((110 * 10 + 330 * 30) / 40)
    assert w.reserved_tokens > w.input_tokens + w.output_tokens
    assert Workload(200.0, 20.0).reserved_tokens == 220.0  # fixed lengths reserve I + O


def test_each_record_shape_gives_its_lengths_and_says_where_they_came_from(
    tmp_path: Path,
) -> None:
    log = _log(tmp_path / "log.jsonl", [
        {"input_tokens": 100, "output_tokens": 20},                      # lengths, observed
        {"prompt": "x" * 400, "max_tokens": 50},                          # text, a cap
        {"messages": [{"role": "user", "content": "y" * 800}]},           # chat, nothing: run's
        {"body": {"prompt": "z" * 40, "output_tokens": 7}},               # batch API, observed
    ])  # fmt: skip
    (tmp_path / "log.jsonl").open("a").write("not json\n")
    mix = read_mix(log, run_output_tokens=64.0)
    assert (mix.records, mix.bad, mix.sampled) == (4, 1, 4)
    assert dict(mix.output_sources) == {"observed": 2, "cap": 1, "run_mean": 1}
    assert mix.input_estimated == 3
    prompts = [100, 400 / CHARS_PER_TOKEN, 800 / CHARS_PER_TOKEN, 40 / CHARS_PER_TOKEN]
    assert mix.input_mean == pytest.approx(np.mean(prompts))
    assert mix.output_mean == pytest.approx(np.mean([20, 50, 64, 7]))
    assert mix.log_file == "log.jsonl"


def test_a_spread_mix_holds_fewer_sequences_than_its_mean_lengths(
    run: Path, tmp_path: Path, capsys
) -> None:
    rng = np.random.default_rng(5)
    ins = np.maximum(1, rng.lognormal(np.log(128), 0.7, 400).round()).astype(int)
    outs = np.maximum(1, rng.lognormal(np.log(32), 1.0, 400).round()).astype(int)
    log = _log(tmp_path / "lognormal.jsonl", [
        {"input_tokens": int(i), "output_tokens": int(o)} for i, o in zip(ins, outs, strict=True)
    ])  # fmt: skip
    assert main([str(run), "--prompt-log", str(log), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mix"]["sampled"] == 400
    p = doc["prediction"]
    assert p["workload"]["input_tokens"] == pytest.approx(ins.mean())
    analysis = analyze_run(run)
    means = predict(fit_capacity(analysis), Workload(ins.mean(), outs.mean()),
                    analysis.knee_params)  # fmt: skip
    # KV binds this server: the long answers hold the batch longer, so the mix fits fewer
    assert p["point"]["bound"] == "kv" == means.point.bound
    assert p["workload"]["context_tokens"] > ins.mean() + outs.mean()
    assert p["kv_slots"] < means.kv_slots
    assert p["point"]["users"] < means.point.users


def test_the_screen_names_the_mix_and_the_run_that_replays_it(run: Path, tmp_path, capsys) -> None:
    log = _log(tmp_path / "small.jsonl", [{"input_tokens": 128, "output_tokens": 32}] * 3)
    assert main([str(run), "--prompt-log", str(log)]) == 0
    out = capsys.readouterr().out
    # words are the product: the screen names the log and the mean lengths it predicts for
    assert "mix: small.jsonl, 3 of 3 records" in out
    # words are the product: the headline's mean lengths
    assert "a mix averaging 128 prompt + 32 completion tokens" in out.splitlines()[0]
    argv = shlex.split(next(line for line in out.splitlines() if "loadknee run" in line))
    assert argv[argv.index("--prompt-log") + 1] == str(log)
    assert "--input-tokens" not in argv


@pytest.mark.parametrize("extra", [["--input-tokens", "100"], ["--output-tokens", "10"]])
def test_fixed_lengths_and_a_log_together_are_refused(run: Path, tmp_path, capsys, extra) -> None:
    log = _log(tmp_path / "l.jsonl", [{"input_tokens": 64, "output_tokens": 16}])
    with pytest.raises(SystemExit) as raised:
        main([str(run), "--prompt-log", str(log), *extra])
    assert raised.value.code == 2


def test_an_unreadable_log_is_one_line_and_exit_2(run: Path, tmp_path: Path, capsys) -> None:
    assert main([str(run), "--prompt-log", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    # words are the product: the one-line error a user reads for a log it cannot read
    assert err.startswith("loadknee predict: cannot read the prompt log") and "\n" not in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{}\n", encoding="utf-8")
    assert main([str(run), "--prompt-log", str(bad)]) == 2
