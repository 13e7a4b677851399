"""The report's PNGs drawn in a child process (:mod:`analysis.report.painter`): every PNG is
written and embedded, the same bytes as drawn in line, and a failing or dying child is an error
of the command, not a report with its plots missing."""

from __future__ import annotations

import base64
import gc
import os
import signal
import struct
import time
from pathlib import Path

import pytest

import analysis.report.figures
from analysis.cli import main
from analysis.report import painter as painter_module
from analysis.report.painter import Painter, PaintError
from tests.support.report_fixtures import (
    no_global_figures,  # noqa: F401 (autouse fixture)
    write_run_dir,
)

PNGS = ("latency.png", "throughput.png", "timeline.png", "interactivity.png")
forks = pytest.mark.skipif(not painter_module.FORKS, reason="the painter forks on Linux only")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return write_run_dir(tmp_path_factory.mktemp("runs") / "run-p", levels=(1, 2, 4, 8))


def _size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its IHDR chunk (which must come first)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", png[:16]
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def _analyze(run_dir: Path, out: Path) -> int:
    return main([str(run_dir), "--out", str(out), "--quiet", "--emit", "none"])


@forks
def test_the_child_writes_every_png_and_the_page_embeds_them(run_dir, tmp_path, capsys) -> None:
    out = tmp_path / "report"
    assert _analyze(run_dir, out) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    for name in PNGS:
        png = (out / name).read_bytes()
        width, height = _size(png)
        assert width >= 800 and height >= 400, (name, width, height)  # 9 in wide at 110 dpi
        assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in page, name
    assert page.count("data:image/png;base64,") == len(PNGS)
    assert capsys.readouterr().out.startswith("DEPLOY: ")  # the child wrote nothing there
    assert gc.get_freeze_count() == 0  # frozen for the fork only: collected again once reaped


@forks
def test_the_pngs_are_the_same_bytes_drawn_in_line(run_dir, tmp_path, monkeypatch) -> None:
    assert _analyze(run_dir, tmp_path / "child") == 0
    monkeypatch.setattr(painter_module, "FORKS", False)
    assert _analyze(run_dir, tmp_path / "inline") == 0
    for name in (*PNGS, "report.html", "knee.json"):
        child, inline = (tmp_path / d / name for d in ("child", "inline"))
        assert child.read_bytes() == inline.read_bytes(), name


@forks
def test_an_error_in_the_child_is_raised_by_the_command(run_dir, tmp_path, monkeypatch) -> None:
    parent = os.getpid()

    def broken(_inputs):
        where = "the parent" if os.getpid() == parent else "the child"
        raise ValueError(f"no plot today (drawn in {where})")

    # the child is a fork: it inherits the patched module
    monkeypatch.setattr(analysis.report.figures, "draw_pngs", broken)
    with pytest.raises(PaintError) as caught:
        _analyze(run_dir, tmp_path / "report")
    text = str(caught.value)
    # words are the product: the error a user reads when a plot fails in its child process
    assert "failed in its process" in text
    # words are the product: the error a user reads when a plot fails in its child process
    assert "ValueError: no plot today (drawn in the child)" in text  # the child's traceback
    assert not (tmp_path / "report" / "report.html").exists()  # no page without its plots


@forks
def test_a_child_that_dies_is_an_error_of_the_command(run_dir, tmp_path, monkeypatch) -> None:
    parent = os.getpid()

    def dying(_inputs):
        if os.getpid() == parent:  # never kill the test process itself
            raise AssertionError("drawn in the parent: the painter did not fork")
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(analysis.report.figures, "draw_pngs", dying)
    with pytest.raises(PaintError, match=r"was killed by signal 9 \(SIGKILL\)"):
        _analyze(run_dir, tmp_path / "report")


@forks
def test_a_child_that_hangs_is_stopped_and_is_an_error(run_dir, tmp_path, monkeypatch) -> None:
    parent = os.getpid()

    def hanging(_inputs):
        if os.getpid() == parent:
            raise AssertionError("drawn in the parent: the painter did not fork")
        time.sleep(60)

    monkeypatch.setattr(analysis.report.figures, "draw_pngs", hanging)
    monkeypatch.setattr(painter_module, "ANSWER_TIMEOUT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(PaintError, match=r"gave no answer in 1 s and was stopped"):
        _analyze(run_dir, tmp_path / "report")
    assert time.monotonic() - started < 30  # stopped, not waited out
    assert not (tmp_path / "report" / "report.html").exists()


@forks
def test_a_child_whose_report_is_not_written_is_stopped_and_reaped() -> None:
    with Painter.start() as painter:
        pid = painter._pid
        assert pid > 0 and gc.get_freeze_count() > 0  # not copied by collections meanwhile
    with pytest.raises(ChildProcessError):  # reaped: no such child left
        os.waitpid(pid, os.WNOHANG)
    assert gc.get_freeze_count() == 0


def test_without_fork_the_pngs_are_drawn_in_line(run_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(painter_module, "FORKS", False)
    with Painter.start() as painter:
        assert painter._pid == 0
    out = tmp_path / "report"
    assert _analyze(run_dir, out) == 0
    assert all(_size((out / name).read_bytes()) for name in PNGS)


def test_when_no_process_can_be_forked_the_pngs_are_drawn_in_line(
    run_dir, tmp_path, monkeypatch
) -> None:
    def no_fork() -> int:
        raise BlockingIOError("fork: Resource temporarily unavailable")

    monkeypatch.setattr(painter_module.os, "fork", no_fork)
    with Painter.start() as painter:
        assert painter._pid == 0 and gc.get_freeze_count() == 0
    out = tmp_path / "report"
    assert _analyze(run_dir, out) == 0
    assert all(_size((out / name).read_bytes()) for name in PNGS)
