"""``loadknee sim`` as a command: help, flags over presets, ready line, SIGTERM, no locust."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import subprocess
import sys

import aiohttp
import pytest

from loadknee_locust.sim.cli import build_parser, params_from_args
from loadknee_locust.sim.launch import SimProcess, cli_args
from loadknee_locust.sim.params import PRESETS, SimParams
from tests.support.kept_out import imports_brought
from tests.support.sim_probe import stream_request


def test_help_lists_every_parameter() -> None:
    text = build_parser().format_help()
    for field in dataclasses.fields(SimParams):
        assert "--" + field.name.replace("_", "-") in text, field.name
    assert "--no-kv-prealloc" in text and "(ms)" in text and "(MiB)" in text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], PRESETS["fast"]),
        (["--preset", "gpu-like"], PRESETS["gpu-like"]),
        (
            ["--preset", "gpu-like", "--max-num-seqs", "16"],
            PRESETS["gpu-like"].replace(max_num_seqs=16),
        ),
        (
            ["--no-kv-prealloc", "--oom-crash"],
            PRESETS["fast"].replace(kv_prealloc=False, oom_crash=True),
        ),
        (
            ["--decode-base-ms", "3.5", "--seed", "9"],
            PRESETS["fast"].replace(decode_base_ms=3.5, seed=9),
        ),
    ],
)
def test_flags_override_the_preset(argv: list[str], expected: SimParams) -> None:
    assert params_from_args(build_parser().parse_args(argv)) == expected


def test_cli_args_round_trip() -> None:
    argv = cli_args("kv-tight", seed=3, max_num_seqs=4, kv_prealloc=False, allow_control=True)
    args = build_parser().parse_args(argv)
    assert args.allow_control and args.port == 0
    assert params_from_args(args) == PRESETS["kv-tight"].replace(
        seed=3, max_num_seqs=4, kv_prealloc=False
    )


def test_bad_parameters_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "sim", "--port", "0", "--max-num-seqs", "0"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2 and "max_num_seqs" in proc.stderr


def test_a_failed_start_shows_the_simulators_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    """Kept, it is quoted in the error; passed through (the demo), it reaches our stderr."""
    with pytest.raises(RuntimeError, match=r"did not start.*stderr: .*max_num_seqs"):
        SimProcess.start("fast", max_num_seqs=0)
    assert "max_num_seqs" not in capfd.readouterr().err
    with pytest.raises(RuntimeError, match="did not start"):
        SimProcess.start("fast", pass_stderr=True, max_num_seqs=0)
    assert "max_num_seqs" in capfd.readouterr().err


def test_the_simulator_never_imports_locust() -> None:
    modules = "loadknee_locust.sim.cli,loadknee_locust.sim.launch"
    assert imports_brought(modules, "locust,gevent,pandas,matplotlib") == []


def test_sigterm_stops_cleanly_and_ends_open_streams() -> None:
    sim = SimProcess.start("fast")
    try:
        assert sim.url.startswith("http://127.0.0.1:")

        async def scenario() -> object:
            async with aiohttp.ClientSession() as session:
                body = {"prompt": "x", "max_tokens": 3000, "ignore_eos": True}
                task = asyncio.create_task(stream_request(session, sim.url, body))
                # the stream is open once the engine runs it (a fixed sleep was too short on a
                # busy machine: the signal came first and the request met a closed engine)
                for _ in range(200):
                    async with session.get(f"{sim.url}/metrics") as resp:
                        if 'num_requests_running{model_name="sim-llm"} 1.0' in await resp.text():
                            break
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.1)  # a few tokens streamed
                sim.proc.send_signal(signal.SIGTERM)
                code = await asyncio.to_thread(sim.proc.wait, 10)
                assert code == 0
                return await task

        result = asyncio.run(scenario())
        assert result.status == 200 and not result.done and result.chunks  # type: ignore[attr-defined]
    finally:
        sim.stop()


def test_help_shows_the_chosen_presets_values() -> None:
    """`sim --preset gpu-like --help` showed the fast preset's values."""
    from loadknee_locust.sim.cli import chosen_preset

    assert chosen_preset(["--preset", "gpu-like", "--help"]) == "gpu-like"
    text = " ".join(build_parser("gpu-like").format_help().split())
    seqs = PRESETS["gpu-like"].max_num_seqs
    assert seqs != PRESETS["fast"].max_num_seqs  # else this test could not tell them apart
    assert f"(gpu-like: {seqs})" in text and "(fast:" not in text


def test_sim_prints_its_parameters_and_predicted_knee() -> None:
    from loadknee_locust.sim.cli import describe
    from loadknee_locust.sim.saturation import predicted_knee_level, saturation_concurrency

    params = PRESETS["gpu-like"]
    lines = describe(params, "gpu-like")
    assert "gpu-like" in lines[0]  # the preset, then every parameter with its value
    assert all(
        f"{f.name}={getattr(params, f.name)}" in lines[0] for f in dataclasses.fields(params)
    )
    assert f" {saturation_concurrency(params, 128, 64):.1f} " in lines[1]  # where it saturates
    level = predicted_knee_level(params, (1, 2, 4, 8, 16, 24, 32, 48, 64), 128, 64)
    assert level is not None and lines[1].split()[-2] == str(level)  # the knee it predicts
