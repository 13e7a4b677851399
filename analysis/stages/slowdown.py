"""Each request's slowdown: its e2e over what the same request took with the server to itself.

Why: a replayed log mixes lengths, so a stage's e2e tail is set by its longest requests, and
even its seconds per 1k tokens spread with the mix (a short answer to a long prompt costs few
seconds per 1k tokens, a long answer many). A 20-request single-user baseline of a lognormal
mix read a P95 of 5.85 s per 1k tokens, set by its two largest requests, where the 1-user step
stage read 3.96; against that yardstick a compute-bound server's tail read 1.59× at 32 users
while every request took twice its single-user time. Held against its own single-user
expectation, each request reads the server's slowdown alone, whatever its lengths: the same
run reads 1.00 at one user and a P95 of 2.17 at 32 (median 2.11), a tight figure the tail rule
can hold against 2×.

**The single-user line** (:func:`single_user_line`): ordinary least squares of the baseline's
e2e on its prompt and completion tokens, ``e2e ≈ a + b × prompt + c × completion`` (one
request at a time: ``b`` is the prefill per prompt token, ``c`` the decode step); a length that
did not vary among those requests drops out of the fit (its cost rides in ``a``), and where
neither varied there is no line: a fixed-length run's slowdown would be its e2e over one
number, which its e2e tail says already (the knee then reads the e2e tail,
:class:`~analysis.knee.knee_inputs.KneeInputs`), and its stages skip the slowdown's intervals.
**A request's slowdown** (:func:`slowdowns`) is its e2e over the line at its own lengths; NaN
where the line reads no positive time or the lengths are unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: fewer baseline requests with known lengths than this make no line
MIN_REQUESTS = 5
#: a length column whose P95 is within this factor of its P5 among the baseline's requests did
#: not vary: it leaves the fit (a lone spread of a token or two cannot tell a slope)
NO_SPREAD = 1.05

FloatArray = np.ndarray


@dataclass(frozen=True)
class SingleUserLine:
    """``e2e ≈ intercept_ms + prompt_ms × prompt tokens + completion_ms × completion tokens``,
    fitted on ``requests`` single-user requests."""

    intercept_ms: float
    prompt_ms: float
    completion_ms: float
    requests: int

    def expected_ms(self, prompt: FloatArray, completion: FloatArray) -> FloatArray:
        """The single-user e2e the line gives each request's lengths (ms)."""
        return self.intercept_ms + self.prompt_ms * prompt + self.completion_ms * completion


def _varies(tokens: FloatArray) -> bool:
    low, high = np.quantile(tokens, [0.05, 0.95])
    return bool(high > NO_SPREAD * max(low, 1.0))


def single_user_line(
    e2e_ms: FloatArray, prompt: FloatArray, completion: FloatArray
) -> SingleUserLine | None:
    """The line through single-user requests' e2e against their lengths (None: fewer than
    :data:`MIN_REQUESTS` with finite figures, neither length varied, or a fit that reads no
    positive time)."""
    e2e, p, c = (np.asarray(a, dtype=float) for a in (e2e_ms, prompt, completion))
    keep = np.isfinite(e2e) & np.isfinite(p) & np.isfinite(c) & (e2e > 0)
    e2e, p, c = e2e[keep], p[keep], c[keep]
    if len(e2e) < MIN_REQUESTS:
        return None
    used = [_varies(p), _varies(c)]
    if not any(used):
        return None
    terms = [np.ones(len(e2e))]
    terms += [column for column, use in zip((p, c), used, strict=True) if use]
    coef, *_ = np.linalg.lstsq(np.column_stack(terms), e2e, rcond=None)
    slopes = iter(coef[1:].tolist())
    prompt_ms = next(slopes) if used[0] else 0.0
    completion_ms = next(slopes) if used[1] else 0.0
    line = SingleUserLine(float(coef[0]), prompt_ms, completion_ms, len(e2e))
    if not np.all(line.expected_ms(p, c) > 0):
        return None
    return line


def slowdowns(
    line: SingleUserLine | None, e2e_ms: FloatArray, prompt: FloatArray, completion: FloatArray
) -> FloatArray:
    """Each request's e2e over its single-user expectation (NaN without a line, where a length
    is unknown, or where the line reads no positive time at its lengths)."""
    e2e = np.asarray(e2e_ms, dtype=float)
    if line is None:
        return np.full(e2e.shape, np.nan)
    expected = line.expected_ms(np.asarray(prompt, dtype=float), np.asarray(completion, float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 0, e2e / expected, np.nan)
