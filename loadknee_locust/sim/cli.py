"""``loadknee sim``: parse flags into :class:`.params.SimParams`, serve until SIGTERM/SIGINT.

The first stdout line, flushed, is exactly ``loadknee-sim listening on http://HOST:PORT`` (with
the real port when ``--port 0`` asked for a free one); tests and scripts wait for it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from typing import Any

from loadknee_core.command_parser import CommandParser
from loadknee_locust.sim.params import DEFAULT_PRESET, PRESETS, SimParams, preset
from loadknee_locust.sim.server import bind_socket, serve

READY_PREFIX = "loadknee-sim listening on "


def chosen_preset(argv: list[str]) -> str:
    """The ``--preset`` in ``argv`` (before the full parse, so ``--help`` shows its values)."""
    pre = CommandParser(prog="loadknee sim", add_help=False)
    pre.add_argument("--preset", default=DEFAULT_PRESET)
    name = pre.parse_known_args(argv)[0].preset
    return name if name in PRESETS else DEFAULT_PRESET


def build_parser(preset_name: str = DEFAULT_PRESET) -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="loadknee sim",
        description="Serve a simulated OpenAI-compatible LLM server with a real knee.",
        epilog=f"Defaults shown are the '{preset_name}' preset's; flags override the chosen "
        "preset. Presets: " + ", ".join(PRESETS) + ".",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="TCP port; 0 picks a free one (default: 8000)"
    )
    parser.add_argument(
        "--preset",
        default=DEFAULT_PRESET,
        choices=sorted(PRESETS),
        help=f"named parameter set to start from (default: {DEFAULT_PRESET})",
    )
    parser.add_argument("--allow-control", action="store_true",
                        help="enable POST /sim/crash (for tests)")  # fmt: skip
    base = PRESETS[preset_name]
    group = parser.add_argument_group("engine parameters (override the preset)")
    for f in dataclasses.fields(SimParams):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(base, f.name)
        helptext = f"{f.metadata['help']} ({preset_name}: {default})"
        if isinstance(default, bool):
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
                               default=None, help=helptext)  # fmt: skip
        else:
            group.add_argument(flag, dest=f.name, type=type(default), default=None,
                               metavar=type(default).__name__.upper(), help=helptext)  # fmt: skip
    return parser


def params_from_args(args: argparse.Namespace) -> SimParams:
    overrides: dict[str, Any] = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(SimParams)
        if getattr(args, f.name) is not None
    }
    return preset(args.preset, **overrides)


def describe(params: SimParams, preset_name: str) -> list[str]:
    """The parameters and where they saturate, for the lines after the ready line: a user can
    predict the knee before sending one request."""
    from loadknee_locust.plugin.options import LlmOptions
    from loadknee_locust.sim.saturation import predicted_knee_level, saturation_concurrency
    from loadknee_locust.sweep.schedule import parse_levels

    d = LlmOptions()
    levels = parse_levels(d.levels)
    values = ", ".join(f"{f.name}={getattr(params, f.name)}" for f in dataclasses.fields(params))
    c_star = saturation_concurrency(params, d.input_tokens, d.output_tokens)
    level = predicted_knee_level(params, levels, d.input_tokens, d.output_tokens)
    where = f"expect the knee at {level} users" if level is not None else "expect no knee"
    return [
        f"parameters (preset {preset_name}): {values}",
        f"predicted: with {d.input_tokens}-token prompts and {d.output_tokens}-token answers "
        f"(loadknee run's defaults) it saturates at {c_star:.1f} concurrent requests; on the "
        f"default levels {d.levels}, {where}",
    ]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = chosen_preset(argv)
    parser = build_parser(name)
    args = parser.parse_args(argv)
    try:
        params = params_from_args(args)
        sock = bind_socket(args.host, args.port)
    except (ValueError, OSError) as exc:
        print(f"loadknee sim: {exc}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host

    def ready() -> None:
        print(f"{READY_PREFIX}http://{host}:{port}", flush=True)
        for line in describe(params, args.preset):
            print(line, flush=True)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(params, sock, allow_control=args.allow_control, on_ready=ready, stop=stop)

    asyncio.run(run())
    return 0
