"""Each request's slowdown against its single-user time (``analysis.stages.slowdown``): the line
through the single-user requests, lengths that did not vary left out, and the slowdown a server
that takes k times as long gives every request whatever its lengths."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.stages.slowdown import SingleUserLine, single_user_line, slowdowns

RNG = np.random.default_rng(7)
#: a lognormal mix of 40 requests' prompt and completion tokens
PROMPT = np.round(RNG.lognormal(5.5, 0.6, 40))
COMPLETION = np.round(RNG.lognormal(4.0, 0.6, 40))


def _e2e(prompt: np.ndarray, completion: np.ndarray) -> np.ndarray:
    """A server's single-user time: 12 ms + 0.02 ms a prompt token + 10 ms a completion token."""
    return 12.0 + 0.02 * prompt + 10.0 * completion


#: case → (prompt, completion, e2e, the line's intercept, prompt and completion ms; None: none)
LINE_CASES = {
    "a mix: both slopes": (PROMPT, COMPLETION, _e2e(PROMPT, COMPLETION), (12.0, 0.02, 10.0)),
    "fixed prompts: the prompt's cost rides in the intercept": (
        np.full(40, 256.0), COMPLETION, _e2e(np.full(40, 256.0), COMPLETION),
        (12.0 + 0.02 * 256, 0.0, 10.0),
    ),
    "fixed lengths: none (the e2e tail says it)": (
        np.full(40, 256.0), np.full(40, 64.0), np.full(40, 700.0), None,
    ),
    "a token of spread is no spread": (
        256.0 + np.arange(40) % 2, COMPLETION, _e2e(np.full(40, 256.0), COMPLETION),
        (12.0 + 0.02 * 256, 0.0, 10.0),
    ),
    "unknown lengths are left out": (
        np.r_[PROMPT[:30], [np.nan] * 10], COMPLETION, _e2e(PROMPT, COMPLETION), (12.0, 0.02, 10.0),
    ),
    "four requests: too few": (PROMPT[:4], COMPLETION[:4], _e2e(PROMPT, COMPLETION)[:4], None),
    "no time at all: none": (PROMPT, COMPLETION, np.zeros(40), None),
}  # fmt: skip


@pytest.mark.parametrize(
    ("prompt", "completion", "e2e", "want"), LINE_CASES.values(), ids=LINE_CASES
)
def test_the_single_user_line(
    prompt: np.ndarray,
    completion: np.ndarray,
    e2e: np.ndarray,
    want: tuple[float, float, float] | None,
) -> None:
    line = single_user_line(e2e, prompt, completion)
    if want is None:
        assert line is None
        return
    assert line is not None
    got = (line.intercept_ms, line.prompt_ms, line.completion_ms)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


#: case → (how much longer the server takes at load, the slowdowns every request reads)
SLOW_CASES = {"alone": 1.0, "twice as long": 2.0, "a third longer": 4 / 3}


@pytest.mark.parametrize("factor", SLOW_CASES.values(), ids=SLOW_CASES)
def test_a_server_k_times_slower_reads_k_for_every_length(factor: float) -> None:
    line = single_user_line(_e2e(PROMPT, COMPLETION), PROMPT, COMPLETION)
    # other requests than the line's: the yardstick is the lengths', not the sample's
    prompt, completion = PROMPT[::-1] * 1.5, COMPLETION * 0.5 + 3
    got = slowdowns(line, factor * _e2e(prompt, completion), prompt, completion)
    assert got == pytest.approx(np.full(40, factor), rel=1e-9)


def test_no_line_or_no_time_reads_nothing() -> None:
    e2e = np.array([100.0, 200.0, 300.0])
    assert np.isnan(slowdowns(None, e2e, e2e, e2e)).all()
    below_zero = SingleUserLine(-50.0, 0.0, 1.0, 20)  # a line that reads no time for short ones
    got = slowdowns(below_zero, e2e, np.zeros(3), np.array([10.0, 100.0, np.nan]))
    assert np.isnan(got[0]) and got[1] == pytest.approx(4.0) and np.isnan(got[2])
