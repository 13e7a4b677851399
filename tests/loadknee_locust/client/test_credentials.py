"""URL credentials never reach a file, and one rule says which credentials are sent: the API
key (Bearer) when given, else the URL's user:password (Basic)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadknee_locust.client.credentials import authorization, take_url_credentials
from tests.support.run_support import child_env


def _env(host: str) -> SimpleNamespace:
    return SimpleNamespace(host=host, parsed_options=SimpleNamespace(host=host))


def test_credentials_leave_the_host_and_become_basic_auth() -> None:
    env = _env("http://al%40ice:s3cr%3At@127.0.0.1:8000/v1")
    take_url_credentials(env)
    assert env.host == env.parsed_options.host == "http://127.0.0.1:8000/v1"
    token = base64.b64encode(b"al@ice:s3cr:t").decode()
    assert authorization(None, env) == {"Authorization": f"Basic {token}"}


def test_the_api_key_wins_over_url_credentials() -> None:
    env = _env("http://user:pw@127.0.0.1:8000")
    take_url_credentials(env)
    assert authorization("sk-test", env) == {"Authorization": "Bearer sk-test"}


def test_no_credentials_no_header() -> None:
    env = _env("http://127.0.0.1:8000")
    take_url_credentials(env)
    assert env.host == "http://127.0.0.1:8000" and authorization(None, env) == {}


@pytest.mark.slow
def test_no_file_holds_the_url_credentials(sim_server, tmp_path: Path) -> None:
    sim = sim_server("fast")
    secret = "pw-9f3a1c"
    host = sim.url.replace("http://", f"http://tester:{secret}@")
    html = tmp_path / "locust-report.html"
    cmd = [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze",
           "--host", host, "--levels", "1",
           "--stage-seconds", "2", "--warmup-seconds", "0.5", "--cooldown-seconds", "0.5",
           "--baseline-requests", "0", "--out", str(tmp_path / "runs"), "--stop-timeout", "5",
           "--html", str(html), "--csv", str(tmp_path / "locust")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=child_env())
    assert done.returncode == 0, done.stdout[-3000:]
    assert html.stat().st_size > 0
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 4
    leaked = [p for p in files if secret.encode() in p.read_bytes()]
    assert leaked == []
    assert secret not in done.stdout + done.stderr
    assert sum(len(r["request_id"]) == 16 for r in sim.log()) > 0  # the load ran
