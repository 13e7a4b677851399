"""Keep a worker's gevent hub free while it takes a spawn message: Locust's default options, once.

Why: Locust's worker handles every ``spawn`` message inline in its message greenlet, and to keep
the master's custom options it tests each of the master's options with
``k not in argument_parser.default_args_dict()``, which builds and parses Locust's whole
argument parser again for every key. With loadknee's options that is 129 keys, about 0.14 s
of CPU on a quiet machine during which the hub runs nothing else, and over half a second on a
loaded one. Every user of that worker stalls meanwhile: a conversation's think time that spanned
the cooldown's spawn message came out 0.4-0.6 s long (the mean gap 1.09 s for 1.0 s asked, with
two workers on a loaded 2-core machine), and a curve replay, which sends one spawn message a
second, kept its workers' hubs blocked for most of every second.

The cure: ``default_args_dict`` is computed once per process (Locust's own options, before any
custom one: the same answer every time), and each call gets its own copy of that answer. Only
the keys are used by Locust (membership tests), so nothing else changes. Pure: the caller passes
Locust's ``argument_parser`` module in; a Locust without the function is left as it is.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("loadknee")

#: marks the wrapper, so a second install (several Environments in one process) is a no-op
_CACHED_ATTR = "_loadknee_cached"


def cache_default_args(argument_parser: Any) -> bool:
    """Make ``argument_parser.default_args_dict`` compute once; True when it is cached now."""
    original: Callable[[], dict[str, Any]] | None = getattr(
        argument_parser, "default_args_dict", None
    )
    if original is None or not callable(original):
        log.debug("loadknee: this Locust has no argument_parser.default_args_dict; left as is")
        return False
    if getattr(original, _CACHED_ATTR, False):
        return True
    computed: list[dict[str, Any]] = []

    @functools.wraps(original)
    def default_args_dict() -> dict[str, Any]:
        if not computed:
            computed.append(original())
        return dict(computed[0])  # a copy: a caller that changes it changes only its own

    setattr(default_args_dict, _CACHED_ATTR, True)
    argument_parser.default_args_dict = default_args_dict
    return True
