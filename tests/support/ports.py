"""Loopback ports for the tests' servers that no other test process can be handed meanwhile.

A port taken by binding port 0 and closing comes from the kernel's ephemeral range, and that
range is what every other process's port-0 bind and outgoing connection draws from: with six
test processes starting simulators, the port could be given to another test's server in the
second or two before Locust bound it (CI on c2f54fa: the web UI test polled a port another
test's server held and read 404s for 30 s). These ports lie outside the ephemeral range, in a
slice of their own for each pytest-xdist worker, handed out in turn and checked bindable.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

SLICE = 800  # ports for each test process
SLICES = 16  # test processes with a slice of their own (worker gw16 shares gw0's)
_DEFAULT_EPHEMERAL = (32768, 60999)


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default where it cannot be read)."""
    try:
        low, high = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL
    return low, high


def worker_index(name: str | None = None) -> int:
    """This pytest-xdist worker's number (``gw3`` → 3); 0 for a run without workers."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "") if name is None else name
    digits = name.removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


def slice_start(low: int, high: int, index: int) -> int:
    """The first port of worker ``index``'s slice: below the ephemeral range where it leaves
    room, above it otherwise."""
    span = SLICE * SLICES
    first = low - span if low - span >= 10000 else high + 1
    if first + span > 65536:
        first = 10000  # a kernel whose range leaves no room on either side: best effort
    return first + (index % SLICES) * SLICE


def _candidates() -> itertools.cycle[int]:
    start = slice_start(*ephemeral_range(), worker_index())
    return itertools.cycle(range(start, start + SLICE))


_NEXT = _candidates()


def bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nobody listens on, from this test process's slice: not handed to any
    other process by the kernel, and not handed again by this one until the slice wraps."""
    for _ in range(SLICE):
        port = next(_NEXT)
        if bindable(port):
            return port
    raise RuntimeError(f"no bindable port in this test process's slice of {SLICE}")
