"""A worker builds Locust's default options once, not once per option of every spawn message."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from loadknee_locust.plugin.spawncost import cache_default_args


def _fake_argument_parser() -> tuple[SimpleNamespace, list[int]]:
    calls: list[int] = []

    def default_args_dict() -> dict[str, Any]:
        calls.append(1)
        return {"host": None, "users": 1, "expect_workers": 1}

    return SimpleNamespace(default_args_dict=default_args_dict), calls


def test_the_defaults_are_built_once_and_each_caller_gets_its_own_copy() -> None:
    module, calls = _fake_argument_parser()
    assert cache_default_args(module)
    master_options = {"host": "h", "llm_levels": "1,2", "llm_turns": 3, "users": 5}
    # what Locust's worker does with each spawn message, one call per key
    for _ in range(3):
        custom = {k: v for k, v in master_options.items() if k not in module.default_args_dict()}
        assert custom == {"llm_levels": "1,2", "llm_turns": 3}
    assert len(calls) == 1
    first = module.default_args_dict()
    first["llm_turns"] = 3  # a caller that changes its copy changes nothing for the next one
    assert module.default_args_dict() == {"host": None, "users": 1, "expect_workers": 1}
    assert module.default_args_dict.__name__ == "default_args_dict"


def test_a_second_install_keeps_the_one_cache_and_an_older_locust_is_left_alone() -> None:
    module, calls = _fake_argument_parser()
    assert cache_default_args(module)
    cached = module.default_args_dict
    assert cache_default_args(module) and module.default_args_dict is cached
    module.default_args_dict()
    module.default_args_dict()
    assert len(calls) == 1
    bare = SimpleNamespace()
    assert not cache_default_args(bare) and not hasattr(bare, "default_args_dict")


def test_the_installed_locust_still_asks_for_the_defaults_per_spawn_message() -> None:
    """The cache only helps while Locust's worker calls ``argument_parser.default_args_dict``
    when it takes a spawn message; a Locust that stops doing so fails here, by name (in a
    subprocess: importing locust would patch this test process with gevent)."""
    import subprocess
    import sys

    probe = (
        "import inspect\n"
        "from locust import argument_parser\n"
        "from locust.runners import WorkerRunner\n"
        "from loadknee_locust.plugin.spawncost import cache_default_args\n"
        "source = inspect.getsource(WorkerRunner.handle_message)\n"
        "assert 'argument_parser.default_args_dict()' in source, 'the call moved'\n"
        "before = argument_parser.default_args_dict()\n"
        "assert cache_default_args(argument_parser)\n"
        "assert argument_parser.default_args_dict() == before\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
