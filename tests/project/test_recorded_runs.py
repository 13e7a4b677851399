"""The shared recorded runs (tests/support/recorded_runs.py): recorded once however many ask at
once, read back as written, and recorded again after a failed try."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support import recorded_runs


def _counting(calls: list[float], fail: bool = False):  # type: ignore[no-untyped-def]
    def record(folder: Path) -> tuple[str, list[dict[str, Any]]]:
        calls.append(time.monotonic())
        (folder / "run").mkdir()
        time.sleep(0.3)  # long enough for the other askers to arrive while it records
        if fail:
            raise AssertionError("the sweep failed")
        return "printed", [{"request_id": "a" * 16}]

    return record


def test_many_askers_one_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setitem(recorded_runs.KINDS, "fake", _counting(calls))
    with ThreadPoolExecutor(max_workers=4) as pool:  # flock: each ask opens its own lock file
        got = list(pool.map(lambda _: recorded_runs.recorded(tmp_path, "fake"), range(4)))
    assert len(calls) == 1
    assert {g.path for g in got} == {tmp_path / "fake" / "run"}
    assert all(g.output == "printed" and g.sim_log == [{"request_id": "a" * 16}] for g in got)


def test_a_failed_recording_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setitem(recorded_runs.KINDS, "fake", _counting(calls, fail=True))
    with pytest.raises(AssertionError, match="the sweep failed"):
        recorded_runs.recorded(tmp_path, "fake")
    monkeypatch.setitem(recorded_runs.KINDS, "fake", _counting(calls))
    assert recorded_runs.recorded(tmp_path, "fake").output == "printed"
    assert len(calls) == 2
