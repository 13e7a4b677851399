"""Prefill probes: single requests at a few prompt lengths, timed, before the sweep.

Why: ``loadknee predict`` needs the prefill cost per prompt token (γ). A fixed-length run's
rows all carry one prompt length, so their TTFT cannot separate the prefill from the rest of
the first token; a line of time against prompt tokens through a few single requests at five
lengths from T/4 to 4·T tokens can (``analysis.predict.fit``). The span is wide on purpose: a
probe's wall time carries a few milliseconds of jitter (the host, the server's step loop) that
only ever adds, and between T/2 and 2·T at T = 256 the true prefill difference is barely twice
that jitter on a fast server; three rounds let the fit take each length's fastest. They go out
right after a successful calibration of a fixed-length source, one at a time with
``max_tokens=1`` and a unique tag each (no prefix-cache hit between them), so they cost a few
seconds and are off with calibration.

This module is the loop alone: ``send`` makes and times the request (``client.state`` wires the
HTTP call in), so the lengths asked, their order and the skipping of failures are testable with a
plain function.
"""

from __future__ import annotations

from collections.abc import Callable

#: the prompt lengths probed, as fractions of the run's target length T (a server that refuses
#: 4·T as too long still answers the other four)
LENGTH_FACTORS = (1.0, 0.25, 4.0, 0.5, 2.0)
#: fewer answered probes than this make no line: none are kept
MIN_ANSWERED = 3


def probe_prefill(
    send: Callable[[int], tuple[int, float] | None],
    words_for: Callable[[int], int],
    target: int,
    rounds: int = 3,
) -> list[tuple[int, float]]:
    """``(prompt tokens, ms)`` of each answered probe, in the order sent; empty below
    :data:`MIN_ANSWERED` answers.

    ``send(words)`` sends one probe of ``words`` filler words and returns the server's
    ``usage.prompt_tokens`` and the request's wall time in ms, or None where it failed (a
    prompt too long for the server, an error: skipped, never fatal, and it may raise too).
    Each round asks every length once (T, T/4, 4·T, T/2, 2·T), so a drift in the server's speed
    over the probes lands on every length alike rather than on one.
    """
    lengths = [max(1, round(target * f)) for f in LENGTH_FACTORS]
    answered: list[tuple[int, float]] = []
    for _ in range(rounds):
        for tokens in lengths:
            try:
                got = send(words_for(tokens))
            except Exception:  # a probe's failure is the probe's alone: the run goes on
                got = None
            if got is not None:
                answered.append(got)
    return answered if len(answered) >= MIN_ANSWERED else []
