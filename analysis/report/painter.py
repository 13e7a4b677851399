"""The report's PNGs drawn in a child process, while the parent writes the other report files.

Why: matplotlib takes about as long to import as pandas, and drawing the four PNGs as long
again; done in line, they were most of ``loadknee analyze``'s time on a small run (issue 38).
The CLI starts the child (:meth:`Painter.start`, a fork) before it analyses the run, so that the
child imports matplotlib on another core meanwhile; once the answer is printed,
:meth:`Painter.draw` sends the child what the plots read (:class:`PlotInputs`, pickled) and the
child draws and writes the PNG files while the parent writes the texts and the cluster files.
:meth:`Painter.result` waits for it: the page embeds the PNGs, and the report is whole when the
command exits.

Errors are not lost: an exception in the child comes back as its traceback, and
:meth:`Painter.result` raises :class:`PaintError` with it; so does a child that ended without
an answer (killed, crashed), saying how it ended. :meth:`Painter.close` stops and reaps a child
whose report is not written (an invalid run directory). Forking is used on Linux only (macOS's
system libraries are not fork-safe, Windows has no fork); elsewhere, and for callers that pass
no painter, :class:`Painter` draws in the calling process, in :meth:`Painter.draw`.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from types import TracebackType

from analysis.report.plot_inputs import PlotInputs

#: whether :meth:`Painter.start` forks (tests switch it off to check the in-process path)
FORKS = sys.platform.startswith("linux")
#: how long :meth:`Painter.result` waits for the child's answer before it stops the child: a
#: guard against a child hung in a library (drawing a million-row run takes seconds, not this)
ANSWER_TIMEOUT_S = 600.0
_CHUNK = 1 << 16


class PaintError(RuntimeError):
    """The PNGs were not drawn: the child's traceback, or how it ended."""


def draw_into(inputs: PlotInputs, out: Path) -> dict[str, str]:
    """Draw the PNGs and write them into ``out``; file name → title on the page, page order."""
    from analysis.report.figures import draw_pngs  # matplotlib: loaded only to draw

    titles = {}
    for name, (title, png) in draw_pngs(inputs).items():
        (out / name).write_bytes(png)
        titles[name] = title
    return titles


class Painter:
    """Draws the report's PNGs: in a child started by :meth:`start`, else in this process."""

    def __init__(self) -> None:
        self._pid = 0  # the child's, 0 when none runs
        self._jobs = self._replies = -1  # our ends of the two pipes
        self._sender: threading.Thread | None = None
        self._titles: dict[str, str] | None = None  # drawn in this process
        self._froze = False  # whether start() froze the collector's objects (see there)

    @classmethod
    def start(cls) -> Painter:
        """A painter whose child imports matplotlib now and draws when :meth:`draw` is called
        (in this process where :data:`FORKS` is false)."""
        painter = cls()
        if not FORKS:
            return painter
        jobs_r, jobs_w = os.pipe()
        replies_r, replies_w = os.pipe()
        # both processes share this one's memory, copied page by page where either writes; a
        # garbage collection writes into every object it visits, so frozen (left out of the
        # collections) until the child is reaped, the heap is not copied (it was: the child's
        # first collection, while it read the job, took 0.1 s instead of 2 ms)
        painter._froze = gc.get_freeze_count() == 0
        if painter._froze:
            gc.freeze()
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a limit, memory): draw in this one
            for fd in (jobs_r, jobs_w, replies_r, replies_w):
                os.close(fd)
            painter._thaw()
            return painter
        if pid == 0:  # the child: never returns into the caller's code
            code = 1
            try:
                os.close(jobs_w)
                os.close(replies_r)
                _child(jobs_r, replies_w)
                code = 0
            finally:
                os._exit(code)
        os.close(jobs_r)
        os.close(replies_w)
        painter._pid, painter._jobs, painter._replies = pid, jobs_w, replies_r
        return painter

    @property
    def has_job(self) -> bool:
        """Whether :meth:`draw` was called."""
        return self._titles is not None or self._sender is not None

    def draw(self, inputs: PlotInputs, out: Path) -> None:
        """Draw the PNGs into ``out`` (it exists): the child starts on them and this returns;
        without a child, they are drawn before this returns."""
        if not self._pid:
            self._titles = draw_into(inputs, out)
            return
        job = pickle.dumps((inputs, out), protocol=pickle.HIGHEST_PROTOCOL)
        # a thread, so that a job larger than the pipe holds does not wait for the child to
        # finish importing matplotlib and read it
        self._sender = threading.Thread(target=self._send, args=(job,), daemon=True)
        self._sender.start()

    def _send(self, job: bytes) -> None:
        try:
            _write_all(self._jobs, job)
        except BrokenPipeError:  # the child is gone: result() says how
            pass
        finally:
            os.close(self._jobs)
            self._jobs = -1

    def result(self) -> dict[str, str]:
        """Wait for the PNGs; file name → title on the page, in the page's order. Raises
        :class:`PaintError` if the child failed or ended without an answer."""
        if not self._pid:
            if self._titles is None:
                raise PaintError("no PNG was drawn: result() before draw()")
            return self._titles
        if self._sender is None:
            raise PaintError("no PNG was drawn: result() before draw()")
        try:
            reply = _read_all(self._replies, timeout_s=ANSWER_TIMEOUT_S)
        except TimeoutError:
            self.close()
            raise PaintError(
                f"the process drawing the report's PNGs gave no answer in "
                f"{ANSWER_TIMEOUT_S:g} s and was stopped"
            ) from None
        self._sender.join()
        os.close(self._replies)
        self._replies = -1
        _, status = os.waitpid(self._pid, 0)
        self._pid = 0
        self._thaw()
        if not reply:
            raise PaintError(f"the process drawing the report's PNGs {_ended(status)}")
        ok, value = pickle.loads(reply)
        if not ok:
            raise PaintError(f"drawing the report's PNGs failed in its process:\n{value}")
        titles: dict[str, str] = value
        return titles

    def close(self) -> None:
        """Stop the child if it still runs (no report is written) and reap it; idempotent."""
        if self._pid:
            os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
            self._pid = 0
        self._thaw()
        if self._sender is not None:  # its write ends: the child is gone
            self._sender.join()
        for fd in (self._jobs, self._replies):
            if fd >= 0:
                os.close(fd)
        self._jobs = self._replies = -1

    def _thaw(self) -> None:
        """The objects frozen before the fork back in the collections: the child is gone."""
        if self._froze:
            gc.unfreeze()
            self._froze = False

    def __enter__(self) -> Painter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _child(jobs: int, replies: int) -> None:
    """The forked child: import matplotlib, wait for the job, draw, answer (a pickled
    ``(True, titles)`` or ``(False, traceback)``). Nothing on stdout: that is the parent's
    answer, and a reader waits for its end."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        import analysis.report.figures  # noqa: F401 (matplotlib, while the parent analyses)

        job = _read_all(jobs)
        os.close(jobs)
        if not job:  # the parent writes no report
            return
        inputs, out = pickle.loads(job)
        reply: tuple[bool, object] = (True, draw_into(inputs, out))
    except BaseException:  # every failure goes back to the parent, which raises it
        reply = (False, traceback.format_exc())
    _write_all(replies, pickle.dumps(reply))
    os.close(replies)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:_CHUNK]) :]


def _read_all(fd: int, timeout_s: float | None = None) -> bytes:
    """Everything until the writer closes its end; TimeoutError past ``timeout_s`` in all."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    chunks: list[bytes] = []
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _ended(status: int) -> str:
    """How a child ended, from its wait status."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"was killed by signal {number} ({signal.Signals(number).name}) before it answered"
    return f"exited {os.waitstatus_to_exitcode(status)} without an answer"
