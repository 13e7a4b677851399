"""Warm-up and cooldown seconds that follow the stage length when the user gives none.

Why: a fixed 30 s warm-up made ``--stage-seconds 4`` an error ("must exceed --warmup-seconds
(30)"), so every short run needed two more flags. The rule keeps the timed method's numbers for
its own stage length (2 minutes: 30 s warm-up, 10 s cooldown) and scales both down with shorter
stages, as GuideLLM's ``--warmup-percent`` / ``--cooldown-percent`` take a share of the run:

* **warm-up** = min(:data:`WARMUP_CAP_S`, :data:`SHARE` × stage): a quarter of the stage, at most
  30 s. A quarter is long enough for the server's batch to fill and its prefix cache to settle at
  the new level (a few request lifetimes at any stage length a short run would choose), and leaves
  three quarters measured;
* **cooldown** = min(:data:`COOLDOWN_CAP_S`, :data:`SHARE` × stage): a quarter of the stage, at
  most 10 s; queues drain in about one request lifetime, which a stage several lifetimes long
  outlasts.

A stage without a planned length (``--llm-stage-requests``, or a stage length of ``auto``) keeps
the caps: its length is known only once it has run. A number the user gives is used as given;
``auto`` (the default) asks for the rule.
"""

from __future__ import annotations

from typing import Final

#: the value that asks for the rule (the options' default)
AUTO: Final = "auto"
#: the share of a timed stage taken by each of warm-up and cooldown
SHARE: Final = 0.25
#: the timed method's warm-up and cooldown for its 2-minute stages: the rule's upper bounds
WARMUP_CAP_S: Final = 30.0
COOLDOWN_CAP_S: Final = 10.0


def parse_phase_seconds(text: str | float, flag: str) -> float | None:
    """``"3"`` → 3.0, ``"auto"`` → None (follow the stage); negative or junk: ValueError."""
    raw = str(text).strip().lower()
    if raw in (AUTO, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{flag} must be a number of seconds or 'auto', got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{flag} must not be negative (seconds or 'auto'), got {text!r}")
    return value


def scaled_seconds(given: float | None, stage_seconds: float | None, cap_s: float) -> float:
    """``given`` when the user gave it; else :data:`SHARE` of a timed stage, at most ``cap_s``
    (``stage_seconds`` None or 0: no planned length, so ``cap_s``)."""
    if given is not None:
        return given
    if not stage_seconds:
        return cap_s
    return min(cap_s, SHARE * stage_seconds)


def warmup_seconds(given: float | None, stage_seconds: float | None) -> float:
    """The warm-up of each level (see the module docstring)."""
    return scaled_seconds(given, stage_seconds, WARMUP_CAP_S)


def cooldown_seconds(given: float | None, stage_seconds: float | None) -> float:
    """The pause with 0 users after each stage (see the module docstring)."""
    return scaled_seconds(given, stage_seconds, COOLDOWN_CAP_S)
