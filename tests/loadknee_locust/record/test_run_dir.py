"""run.json and the run directory: secrets never written, credentials stripped, names unique."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.record.rundir import (
    build_run_info,
    create_run_dir,
    prompt_info_from_options,
    public_options,
    write_run_json,
)


def test_public_options_drop_secrets_and_strip_urls() -> None:
    opts = SimpleNamespace(
        host="http://admin:hunter2@gpu:8000",
        llm_levels="1,2",
        llm_api_key_env="OPENAI_API_KEY",
        web_auth="user:pass",
        hf_token="hf_x",
        my_secret="s",
        db_password="p",
        llm_custom="c",
        extra={"x": 1, "api_key": "k"},
    )
    out = public_options(opts, secret_names={"llm_custom"})
    assert out == {"extra": {"x": 1}, "host": "http://gpu:8000", "llm_levels": "1,2"}


def test_public_options_keep_token_counts() -> None:
    """ "token" as a whole word is secret; token counts are parameters run.json must keep."""
    opts = SimpleNamespace(llm_input_tokens=512, llm_output_tokens=128, llm_api_token="t")
    assert public_options(opts) == {"llm_input_tokens": 512, "llm_output_tokens": 128}


def test_create_run_dir_never_reuses_a_used_name(tmp_path: Path) -> None:
    first = create_run_dir(tmp_path / "runs", "r1", 0.0)
    (first / "requests.csv").write_text("x\n")
    second = create_run_dir(tmp_path / "runs", "r1", 0.0)
    assert (first.name, second.name) == ("r1", "r1-1")
    empty = create_run_dir(tmp_path / "runs", "r1", 0.0)  # r1-1 is empty: reused
    assert empty == second
    stamped = create_run_dir(tmp_path / "runs", "", 1_800_000_000.0)
    assert stamped.name == "20270115-080000"
    with pytest.raises(ValueError, match="run-id"):
        create_run_dir(tmp_path / "runs", "../escape", 0.0)


def test_prompt_info_hashes_the_log_and_never_copies_it(tmp_path: Path) -> None:
    log = tmp_path / "prompts.jsonl"
    log.write_text('{"prompt": "confidential text"}\n')
    info = prompt_info_from_options(LlmOptions(prompt_log=str(log)))
    assert info["kind"] == "log" and info["log_file"] == "prompts.jsonl"
    assert info["log_sha256"] == hashlib.sha256(log.read_bytes()).hexdigest()
    write_run_json(tmp_path, {"prompt_source": info})
    assert "confidential" not in (tmp_path / "run.json").read_text()
    fixed = prompt_info_from_options(LlmOptions(input_tokens=128, output_tokens=64))
    assert (fixed["kind"], fixed["target_input_tokens"], fixed["target_output_tokens"]) == (
        "fixed",
        128,
        64,
    )
    assert json.loads((tmp_path / "run.json").read_text())["prompt_source"]["kind"] == "log"


def test_build_run_info_has_the_contract_keys_and_no_secret() -> None:
    opts = SimpleNamespace(
        host="http://u:SECRETPW@h:1", llm_levels="1,2,4,8", llm_model="m", llm_endpoint="chat",
        llm_no_stream=True, llm_input_tokens=64, llm_output_tokens=32, llm_prompt_log="",
        web_login_password="SECRETPW",
    )  # fmt: skip
    info = build_run_info(
        run_id="r", start_unix_s=1.0, host="", options=LlmOptions.from_parsed(opts), parsed=opts,
        mode="master", worker_count=2, stop_timeout_s=120.0,
    )  # fmt: skip
    assert info["levels"] == [1, 2, 4, 8] and info["stream"] is False
    assert info["target_url"] == "http://h:1" and info["worker_count"] == 2
    assert info["end_unix_s"] is None and set(info["versions"]) >= {"loadknee", "python", "locust"}
    assert "SECRETPW" not in json.dumps(info)
    assert info["parameters"]["llm_levels"] == "1,2,4,8" and "web_login_password" not in info


def test_run_info_without_a_parser_records_the_typed_options() -> None:
    """Library use (no parsed options): the parameters are the --llm-* values in use."""
    options = LlmOptions(levels="2,4", api_key_env="MY_KEY", no_stream=True)
    info = build_run_info(
        run_id="r", start_unix_s=1.0, host="http://h", options=options, mode="local",
        worker_count=0, stop_timeout_s=None,
    )  # fmt: skip
    assert (info["levels"], info["stream"], info["target_url"]) == ([2, 4], False, "http://h")
    params = info["parameters"]
    assert params["llm_levels"] == "2,4" and params["llm_no_stream"] is True
    assert set(params) == {"llm_" + name for name in vars(LlmOptions())} - {"llm_api_key_env"}


def test_run_json_versions_name_the_geventhttpclient_that_read_the_streams() -> None:
    """The stream reader relies on geventhttpclient internals: run.json says which release it
    was (the package's own ``__version__`` is the oracle, not the metadata the code reads)."""
    import geventhttpclient

    info = build_run_info(
        run_id="r", start_unix_s=1.0, host="", options=LlmOptions(), mode="local",
        worker_count=0, stop_timeout_s=1.0,
    )  # fmt: skip
    assert info["versions"]["geventhttpclient"] == geventhttpclient.__version__


@pytest.mark.parametrize(
    ("infos", "expected"),
    [
        ([], {}),
        ([{"kind": "fixed", "stale_connection_retries": 2}], {"kind": "fixed",
                                                              "stale_connection_retries": 2}),
        (  # two workers: counters add up, other facts: the later one wins
            [
                {"model": "a", "stale_connection_retries": 2, "stream_stamps": {"kernel": 5}},
                {"model": "b", "stale_connection_retries": 1,
                 "stream_stamps": {"kernel": 3, "readline": 1}},
            ],
            {"model": "b", "stale_connection_retries": 3,
             "stream_stamps": {"kernel": 8, "readline": 1}},
        ),
        ([{"stream_stamps": {"kernel": 1}}, {"stream_stamps": None}], {"stream_stamps": None}),
        (  # each worker's prefill probes are a whole sample: one worker's, never a union
            [
                {"prefill_probes": [[64, 8.2], [128, 11.4], [256, 17.8]],
                 "setup_requests": {"calibration_probes": 10}},
                {"prefill_probes": [[64, 8.4], [128, 11.1], [256, 18.0]],
                 "setup_requests": {"calibration_probes": 9}},
            ],
            {"prefill_probes": [[64, 8.4], [128, 11.1], [256, 18.0]],
             "setup_requests": {"calibration_probes": 19}},
        ),
    ],
)  # fmt: skip
def test_prompt_infos_of_several_processes_combine(infos, expected) -> None:
    from loadknee_locust.plugin.wiring import combine_prompt_infos

    before = json.dumps(infos)
    assert combine_prompt_infos(infos) == expected
    assert json.dumps(infos) == before  # the inputs are not changed
