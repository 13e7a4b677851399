"""Installing outside the repo: the package list, one version, ``loadknee init``, a built wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
from importlib import metadata
from pathlib import Path

import pytest

import loadknee_locust
from tests.support.paths import REPO
from tests.support.run_support import child_env, read_run_dir

ROOT = REPO
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages_in_tree() -> set[str]:
    found = {"loadknee_locust.examples"}  # locustfiles/, mapped by [tool.setuptools.package-dir]
    for top in ("loadknee_core", "loadknee_locust", "analysis"):
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]:
            if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py")):
                found.add(".".join(folder.relative_to(ROOT).parts))
    return found


def test_every_package_in_the_tree_is_listed_for_the_wheel() -> None:
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == _packages_in_tree()
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {
        "loadknee_locust.examples": "locustfiles"
    }


def test_the_version_is_written_once() -> None:
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert metadata.version("loadknee") == loadknee_locust.__version__


def _init(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "loadknee_locust", "init", str(folder), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_init_writes_files_once_and_lists_every_option(tmp_path: Path) -> None:
    done = _init(tmp_path / "proj", "--host", "http://10.0.0.1:8000")
    assert done.returncode == 0, done.stderr
    conf = (tmp_path / "proj" / "locust.conf").read_text()
    assert "host = http://10.0.0.1:8000" in conf
    from loadknee_locust.commands.init import option_lines

    keys = [line.split(" = ")[0][2:] for line in option_lines() if " = " in line]
    assert len(keys) >= 30 and all(f"# {key} = " in conf for key in keys)
    assert "%(" not in conf and "%%" not in conf, "a help text's placeholder left unfilled"
    # words are the product: the commented config file a user edits
    assert "# Sampling temperature (default 0.0).\n# llm-temperature = 0.0\n" in conf
    again = _init(tmp_path / "proj")
    # words are the product: the message a user reads for bad input
    assert again.returncode == 1 and "already exist" in again.stderr
    example = _init(tmp_path / "ex", "--example", "log_replay")
    assert example.returncode == 0, example.stderr
    shipped = (ROOT / "locustfiles" / "log_replay.py").read_text()
    assert (tmp_path / "ex" / "locustfile.py").read_text() == shipped


@pytest.mark.slow
def test_init_starter_runs_a_sweep_with_plain_locust(sim_server, tmp_path: Path) -> None:
    sim = sim_server(preset="fast")
    folder = tmp_path / "proj"
    assert _init(folder, "--host", sim.url).returncode == 0
    cmd = [
        sys.executable, "-m", "locust", "--config", "locust.conf",
        "--llm-levels", "1,2", "--llm-stage-seconds", "2", "--llm-warmup-seconds", "0.5",
        "--llm-cooldown-seconds", "0.5", "--llm-baseline-requests", "2",
        "--llm-input-tokens", "32", "--llm-output-tokens", "8", "--llm-run-id", "starter",
    ]  # fmt: skip
    done = subprocess.run(
        cmd, cwd=folder, env=child_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rd = read_run_dir(folder / "runs" / "starter")
    assert {r["outcome"] for r in rd.requests} == {"ok"}
    assert {r["stage"] for r in rd.requests if r["phase"] == "measure"} == {"1", "2"}


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_and_runs_the_demo_outside_the_repo(tmp_path: Path) -> None:
    """``python -m build`` → a wheel → a new venv → ``loadknee demo`` from a folder outside."""
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = dist.glob("loadknee-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    # the new venv only: a PYTHONPATH to a checkout (its loadknee.egg-info) made pip skip the
    # wheel as "already satisfied"
    env = {k: v for k, v in child_env().items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    # --no-compile: pip would byte-compile every file of pandas, matplotlib, locust... (half the
    # install's time here: 21.5 s against 12.0 s); the demo below compiles what it imports, and
    # pip's compile step never failed an install anyway (it ignores syntax errors)
    install = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-compile", str(wheel)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def loadknee(*args: str, timeout: float = 60) -> str:
        done = subprocess.run(
            [str(bin_dir / "loadknee"), *args], cwd=elsewhere, env=env,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    assert loadknee("--version").strip() == f"loadknee {loadknee_locust.__version__}"
    loadknee("init", "proj", "--example", "fixed_length")
    assert (elsewhere / "proj" / "locustfile.py").read_text() == (
        ROOT / "locustfiles" / "fixed_length.py"
    ).read_text()
    # a short demo: tests/e2e/test_demo.py checks the whole demo's answer; this one proves the
    # installed wheel runs a sweep and writes its report. Short requests (8 output tokens, about
    # 0.1 s on the `fast` simulator against 0.7 s at the demo's 64) give each 2 s stage tens of
    # rows, so every stage is judged; no check here times anything
    out = loadknee(
        "demo", "--levels", "1,2", "--stage-seconds", "2", "--warmup-seconds", "0.5",
        "--cooldown-seconds", "0.5", "--baseline-requests", "3", "--input-tokens", "32",
        "--output-tokens", "8", "--out", "runs", timeout=240,
    )  # fmt: skip
    (run_dir,) = (elsewhere / "runs").iterdir()
    assert (run_dir / "report" / "report.html").exists()
    # the answer on the screen is the one knee.json holds (both stages served: a figure, not none)
    answer = json.loads((run_dir / "report" / "knee.json").read_text())["answer"]
    assert answer["deploy_concurrency"] is not None, out
    assert f"\nDEPLOY: {answer['deploy_concurrency']} " in out, out
    # the installed package ran, not the repo's sources
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import loadknee_locust; print(loadknee_locust.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert str(env_dir) in where.stdout, where.stdout
