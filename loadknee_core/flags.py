"""Command-line flags declared on a parameter dataclass's fields, the way ``LlmOptions`` does.

A field that is a flag carries its spelling and help in :func:`flag`; its default is the field's
default, its type the field's annotation (``float | None`` → ``float``), and a ``Literal`` type
gives the choices. From that one table:

* :func:`add_flags` adds the flags to an argparse (or configargparse) parser in one group, either
  with the class's defaults (the sweep records every value in ``run.json``) or with none
  (``given_only``: a flag that was not typed is absent from the namespace, so a recorded value
  stands);
* :func:`given_values` reads back the ``{field: value}`` of the flags the namespace holds;
* :func:`metavar` names what to type after a flag (``N``, ``SECONDS``, ``PCT``, ``FILE``) from
  the field's name and type, for these flags and the Locust side's ``--llm-*`` ones alike, so no
  help shows an internal name (``KNEE_FLAT_GAIN_RATIO``).

Stdlib only: the Locust side adds the analysis's flags to its parser through this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal

#: the placeholder for a setting of this name, whatever command takes it
METAVAR_NAMES: dict[str, str] = {
    "host": "URL",
    "model": "NAME",
    "run_id": "NAME",
    "out": "DIR",
    "levels": "N,N,...",
    "rates": "RPS,RPS,...",
    "scales": "X,X,...",
    "curve_scales": "X,X,...",
    "slo": "NAME=VALUE,...",
    "extra_body": "JSON",
    "classes": "SPEC|@FILE",
    "think_time": "SECONDS|DIST",
    "replay_curve": "FILE",
    "time_limit": "SECONDS",
    "request_timeout": "SECONDS",
    "labels": "NAME,NAME,...",
}
#: the placeholder for a setting whose name ends so (the first match wins)
METAVAR_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_pct", "PCT"),
    ("_ms", "MS"),
    ("_seconds", "SECONDS"),
    ("_interval", "SECONDS"),
    ("_url", "URL"),
    ("_log", "FILE"),
    ("_tokens", "N"),
    ("_ratio", "RATIO"),
    ("_scale", "X"),
    ("_env", "VAR"),
)
#: the kind of value a field of that type takes, where its name says nothing
METAVAR_KINDS: dict[type, str] = {int: "N", float: "X"}


def metavar(name: str, kind: type | None) -> str:
    """What to type after the flag of setting ``name`` of type ``kind``: never the dest's
    name (a ``knee_``-style prefix on a dest is ignored for the suffix rules)."""
    if name in METAVAR_NAMES:
        return METAVAR_NAMES[name]
    for suffix, shown in METAVAR_SUFFIXES:
        if name.endswith(suffix):
            return shown
    return METAVAR_KINDS.get(kind, "TEXT") if kind is not None else "TEXT"


def flag(default: Any, help: str, *, spelling: str = "", action: str | None = None) -> Any:
    """A parameter field that is a command-line flag (``help`` may hold ``%(default)s``);
    ``spelling`` defaults to its dest's, as argparse spells one (``--knee-tail-ratio``)."""
    meta = {"flag": spelling, "help": help, "action": action}
    return dataclasses.field(default=default, metadata={"flag": meta})


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    """One flag as the parser sees it, derived from its field."""

    name: str
    dest: str
    spelling: str
    default: Any
    kind: type | None
    choices: tuple[str, ...] | None
    help: str
    action: str | None

    def help_text(self) -> str:
        """The help with the class's default filled in, escaped for argparse."""
        shown = "none" if self.default is None else self.default
        return (self.help % {"default": shown}).replace("%", "%%")


def flag_specs(cls: type, *, prefix: str) -> tuple[FlagSpec, ...]:
    """The fields of ``cls`` that are flags, in declaration order."""
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("flag")
        if meta is None:
            continue
        kind, choices = _kind(hints[f.name])
        specs.append(
            FlagSpec(
                name=f.name,
                dest=prefix + f.name,
                spelling=meta["flag"] or "--" + (prefix + f.name).replace("_", "-"),
                default=f.default,
                kind=kind,
                choices=choices,
                help=meta["help"],
                action=meta["action"],
            )
        )
    return tuple(specs)


def _kind(hint: Any) -> tuple[type | None, tuple[str, ...] | None]:
    if typing.get_origin(hint) is Literal:
        return None, tuple(str(c) for c in typing.get_args(hint))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return (None if hint in (str, bool) else hint), None


def add_flags(
    parser: Any,
    cls: type,
    *,
    prefix: str,
    title: str,
    given_only: bool = False,
    skip: Iterable[str] = (),
) -> None:
    """Add the flags of ``cls`` to ``parser`` in a group called ``title``.

    ``given_only``: no defaults on the namespace (a flag not typed is absent), for a command
    whose defaults come from elsewhere (the run's recorded values). ``skip``: field names left
    out (a setting the parser already takes under another name).
    """
    group = parser.add_argument_group(title)
    left_out = set(skip)
    for spec in flag_specs(cls, prefix=prefix):
        if spec.name in left_out:
            continue
        kwargs: dict[str, Any] = {
            "dest": spec.dest,
            "help": spec.help_text(),
            "default": argparse.SUPPRESS if given_only else spec.default,
        }
        if spec.action is not None:
            kwargs["action"] = spec.action
        else:
            if spec.kind is not None:
                kwargs["type"] = spec.kind
            if spec.choices:
                kwargs["choices"] = list(spec.choices)
            else:
                kwargs["metavar"] = metavar(spec.name, spec.kind)
        group.add_argument(spec.spelling, **kwargs)


def given_values(ns: Any, cls: type, *, prefix: str) -> dict[str, Any]:
    """``{field: value}`` for every flag of ``cls`` present on the namespace ``ns``."""
    return {
        spec.name: getattr(ns, spec.dest)
        for spec in flag_specs(cls, prefix=prefix)
        if hasattr(ns, spec.dest)
    }
