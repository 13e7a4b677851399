"""Shared fixtures: ``sim_server`` starts real ``loadknee sim`` subprocesses on free ports.

Usage::

    def test_x(sim_server):
        sim = sim_server(preset="fast", max_num_seqs=4)   # any SimParams field as a keyword
        sim.url            # "http://127.0.0.1:PORT"
        sim.log()          # GET /sim/log: one record per request (server-side truth)
        sim.stats()        # GET /sim/stats: outcome counters, preemptions, restarts, params
        sim.metrics_text() # GET /metrics (Prometheus text)
        sim.crash()        # POST /sim/crash (control is enabled by default here)

Every server started through the factory is stopped at teardown, even when the test fails.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from loadknee_locust.sim.launch import SimProcess

if TYPE_CHECKING:
    from tests.support.recorded_runs import RecordedRun


def _keep_compiled_modules() -> Path | None:
    """Let the suite's processes keep the modules they compile, outside the source tree; the
    folder (None: Python's own setting stands).

    Where ``PYTHONDONTWRITEBYTECODE`` is set (this kind of machine sets it), every Python process
    of a run (six test processes, and each sweep's Locust, simulator and scraper) compiled the
    project again, and each test process rewrote every test module's asserts: 9.8 s of CPU per
    process to collect the suite, 2.6 s from compiled files. They now go to ``pycache`` in the
    virtual environment that runs the suite (``PYTHONPYCACHEPREFIX``, inherited by every child;
    the loadknee cache folder outside a venv), so a second run in the same checkout starts
    faster and a new clone's venv starts empty. A user's own prefix is kept.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.platform == "win32":
        return None
    from tests.realengine.engine import cache_dir

    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if not prefix:
        root = sys.prefix if sys.prefix != sys.base_prefix else cache_dir().parent
        prefix = str(Path(root) / "pycache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix
    return Path(prefix)


_PYCACHE = _keep_compiled_modules()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Drop what the run compiled under the temp folder (its test files, the packaging test's
    venv and build environments): those paths never come back, so the folder would only grow."""
    if _PYCACHE is not None and not hasattr(config, "workerinput"):
        import shutil

        temp = Path(tempfile.gettempdir()).resolve()
        shutil.rmtree(_PYCACHE / temp.relative_to(temp.anchor), ignore_errors=True)


@pytest.fixture(autouse=True)
def _gevent_clock_now() -> None:
    """Bring gevent's loop clock up to date before each test that may use it.

    libev caches "now" between loop iterations and gevent starts a ``Timeout`` from that cached
    time: in a test process that ran no gevent for a while (other files' tests, in a pytest-xdist
    worker), ``joinall(timeout=20)`` gave up at once, with its greenlets still running.
    """
    gevent = sys.modules.get("gevent")
    if gevent is not None:
        gevent.get_hub().loop.update_now()


@pytest.fixture
def sim_server() -> Iterator[Callable[..., SimProcess]]:
    started: list[SimProcess] = []

    def start(preset: str = "fast", **overrides: Any) -> SimProcess:
        overrides.setdefault("allow_control", True)
        sim = SimProcess.start(preset, **overrides)
        started.append(sim)
        return sim

    try:
        yield start
    finally:
        for sim in started:
            sim.stop()


@pytest.fixture(scope="session")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], RecordedRun]:
    """``recorded_run(kind)``: a run directory of ``kind`` (tests/support/recorded_runs.py),
    recorded once per test run, by whichever process asks first, and shared by every file."""
    from tests.support.recorded_runs import recorded, shared_root  # aiohttp: only when asked

    root = shared_root(tmp_path_factory)
    return lambda kind: recorded(root, kind)


def _selects_realengine(config: pytest.Config) -> bool:
    """Whether this run's paths reach ``tests/realengine`` and ``-m`` does not rule it out."""
    markexpr = config.getoption("markexpr", "") or ""
    if "not realengine" in markexpr or "not slow" in markexpr:
        return False
    engine_dir = (Path(__file__).parent / "realengine").resolve()
    args = [arg.split("::")[0] for arg in config.args] or [str(Path(__file__).parent)]
    for arg in args:
        path = Path(config.invocation_params.dir, arg).resolve()
        if path == engine_dir or engine_dir in path.parents or path in engine_dir.parents:
            return True
    return False


#: when the session started, before the engine build and the llama-server sweep
_STARTED = pytest.StashKey[float]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The session's whole wall time: pytest's own figure (the last line) starts after the
    engine build and the llama-server sweep that run before the first test."""
    started = config.stash.get(_STARTED, None)
    if started is not None and not hasattr(config, "workerinput"):
        terminalreporter.write_line(
            f"[loadknee tests] wall time with the build and the llama-server sweep before the "
            f"first test: {time.monotonic() - started:.0f} s"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Build llama-server and record its one sweep before any test starts, in the controller,
    before pytest-xdist hands out work: the compile holds both cores for about ten minutes, and
    run beside the suite it starved timing checks into failing on a fresh machine; the sweep
    measures an engine that computes on one thread, so it must run alone (tests/realengine/
    llama_sweep.py). Says what it does and how long each took.
    """
    config = session.config
    config.stash[_STARTED] = time.monotonic()
    if (
        hasattr(config, "workerinput")
        or config.getoption("collectonly")
        or not _selects_realengine(config)
    ):
        return  # an xdist worker, a listing, or a run that has no real-engine test
    from tests.realengine.engine import cache_dir, engine_built, ensure_built, missing_tools

    if missing_tools():
        return  # no toolchain: those tests skip and say why
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line, file=sys.stderr)

    if not engine_built():
        say(
            f"[loadknee tests] building llama.cpp's llama-server once for the real-engine tests, "
            f"before any test starts (about 5-10 min on 2 cores; cached in {cache_dir()}; "
            f"log: {cache_dir() / 'setup.log'})"
        )
        started = time.monotonic()
        try:
            ensure_built(progress=lambda s: say(f"[loadknee tests] still building: {s:.0f} s"))
        except Exception as exc:  # the real-engine tests fail themselves, with the log's tail
            elapsed = time.monotonic() - started
            say(f"[loadknee tests] the llama-server build failed after {elapsed:.0f} s: {exc}")
            return
        say(f"[loadknee tests] llama-server built in {time.monotonic() - started:.0f} s")
    _record_llama_sweep(config, say)


def _record_llama_sweep(config: pytest.Config, say: Callable[[str], None]) -> None:
    """Record the real-engine tests' sweep alone and name it to every test process (an
    environment variable they inherit); removed at the session's end."""
    import shutil

    from tests.realengine import llama_sweep

    dest = Path(tempfile.mkdtemp(prefix="loadknee-llama-sweep-"))
    config.add_cleanup(lambda: shutil.rmtree(dest, ignore_errors=True))
    say(
        "[loadknee tests] recording the llama-server sweep alone, before the test processes "
        "start (about 2 min)"
    )
    try:
        recorded = llama_sweep.record(dest)
    except Exception as exc:  # the fixture records its own and fails there, with the reason
        say(f"[loadknee tests] the llama-server sweep could not be recorded: {exc}")
        return
    path = dest / "sweep.json"
    llama_sweep.save(recorded, path)
    os.environ[llama_sweep.ENV] = str(path)
    say(f"[loadknee tests] llama-server sweep recorded in {recorded.seconds:.0f} s")


#: test files that take minutes, longest first (their wall time at ``-n 6``, measured): pyproject's
#: ``--dist loadfile --no-loadscope-reorder`` hands files to the test processes in this order, so
#: the longest start first and short ones fill in at the end, instead of xdist's own order (files
#: with the most tests first). Files holding a quiet test go after all of these (the llama-server
#: sweep is recorded before any of them: tests/realengine/llama_sweep.py)
LONGEST_FIRST = (
    "test_refine_sim.py",
    "test_verify_sim.py",
    "test_packaging.py",
    "test_docs.py",
    "test_stop_signals.py",
    "test_compute_bound_sim.py",
    "test_run_local.py",
    "test_demo.py",
    "test_multihost.py",
    "test_refusals_independent.py",
    "test_curve_sim.py",
    "test_cluster_sim.py",
    "test_openloop_sim.py",
    "test_fault_suite.py",
    "test_webui_browser.py",
    "test_prefix_cache_sim.py",
    "test_knee_sim.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first, and files holding a ``quiet`` test last of all.

    A quiet test waits for the test each other process is running to end, and they wait for
    it: at the start of the run (where the open-loop timing checks once sat, ninth) it waited
    150 s for the llama-server sweep's setup with five processes idle beside it (``-n 6``:
    ~160 s of each process's 570 s); last, only short tests run beside it. Keep such files
    small (tests/e2e/test_openloop_timing_sim.py holds only its two quiet tests)."""
    quiet_files = {item.path for item in items if item.get_closest_marker("quiet") is not None}

    def rank(item: pytest.Item) -> tuple[bool, int]:
        name = item.path.name
        longest = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
        return item.path in quiet_files, longest

    items.sort(key=rank)  # stable: a file's tests keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse a test module that imports locust: the import monkey-patches this process with
    gevent, and pytest-xdist's worker, which waits on a real thread, then dies with an
    INTERNALERROR ("LoopExit: This operation would block forever") far from the cause. Tests
    run Locust in subprocesses; Locust-side pure code lives where locust is not imported."""
    if "locust" in sys.modules:
        raise pytest.UsageError(
            "a test module imported locust at collection (so gevent patched the test process "
            "and pytest-xdist's worker would hang); import the pure module instead, or run "
            "Locust in a subprocess"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A ``quiet`` test runs alone: under pytest-xdist, the other workers wait between their
    tests until it has finished (and it waits for the test each one is running to finish).

    Two ``flock`` files in the temp folder, named by the session's xdist run id: every test
    holds the run lock shared while it runs; a quiet one holds it exclusively. The turnstile
    keeps other workers' next tests from slipping in while a quiet one waits for the run lock.
    Without xdist (``-n 0``) every test already runs alone.
    """
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id is None or sys.platform == "win32":
        return (yield)
    import fcntl

    folder = Path(tempfile.gettempdir())
    quiet = item.get_closest_marker("quiet") is not None
    with (
        (folder / f"loadknee-tests-{run_id}.turnstile").open("a") as turnstile,
        (folder / f"loadknee-tests-{run_id}.run").open("a") as run_lock,
    ):
        fcntl.flock(turnstile, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        fcntl.flock(run_lock, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        if not quiet:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:
            fcntl.flock(run_lock, fcntl.LOCK_UN)
            if quiet:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
