"""Does a re-run still match the original's answer? PASS/FAIL checks a rollout script can gate on.

The method ends with a re-run after the configuration change, to confirm the table holds. The same
checks serve ``loadknee verify`` (a short re-run at a few levels) and ``loadknee compare --kind
config`` (two full runs, before and after). Each check compares the original ("before") with
the re-run ("after"):

1. **recommended level**: the stage at the original ``max_concurrency`` is still comfortable or
   critical (not the knee, not the red line) in the re-run, judged by the same knee rule;
2. **throughput**: its output tok/s is within the original's interval: the two 95 % intervals
   combined (half-widths in quadrature), and never tighter than ``tolerance_pct`` (default 10 %:
   separate runs also differ by warm-up, placement and clocks, which no single run's interval
   sees);
3. **no red line below the knee**: no re-run stage below the original knee (or at or below
   ``max_concurrency`` when there was none) is the red line.

A check whose level was not measured fails (saying so): nothing is assumed to hold. A throughput
check that fails where either run's machine was overloaded at that level with the server on it
(:func:`analysis.diagnosis.failures.overloaded_stages`) cannot tell: the server waited for CPU the
load generator and the rest of the machine took, so the figure is the machine's. ``loadknee
verify`` exits 3 then (re-run where the server has the CPU to itself); a failure elsewhere still
fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.diagnosis.facts import SharedHostFact
from analysis.model import KneeResult
from analysis.report.stage_reasons import reasons_text
from analysis.stages.levels import level_rows
from loadknee_core.numeric import num, sig4

#: the floor of the throughput check's band, in % of the original
TOLERANCE_PCT = 10.0


@dataclass(frozen=True)
class Check:
    """One verification check and what it found: the numbers it judged by, and the same in words
    (``text``) for the PASS/FAIL lines."""

    name: str  # recommended_level | throughput | no_red_line_below_knee
    passed: bool
    text: str
    #: the level it looked at (the original max_concurrency; the knee, or max_concurrency when
    #: there was none, for no_red_line_below_knee); None when the original recommends none
    users: int | None = None
    #: recommended_level: the re-run's verdict at ``users`` (None: not measured again)
    verdict: str | None = None
    #: throughput: output tok/s before (with its interval's half-width in %) and after
    before_tok_s: float | None = None
    before_hw_pct: float | None = None
    after_tok_s: float | None = None
    #: throughput: how far it moved, and how far it may, in % of before
    moved_pct: float | None = None
    allowed_pct: float | None = None
    #: no_red_line_below_knee: the re-run stages checked, and those that were the red line
    checked_users: tuple[int, ...] = ()
    red_line_users: tuple[int, ...] = ()
    #: throughput: the overloaded shared machine at ``users`` (the busier of the two runs') that
    #: makes a failed check unable to tell; None where the check passed or the machine was not
    overloaded: SharedHostFact | None = None

    @property
    def outcome(self) -> str:
        """``PASS``, ``FAIL``, or ``CANNOT TELL`` (a failure the overloaded machine explains)."""
        if self.passed:
            return "PASS"
        return "CANNOT TELL" if self.overloaded is not None else "FAIL"


def verify_levels(knee: KneeResult, watermark: Any) -> tuple[int, ...]:
    """Levels a verification re-run measures: the recommended max_concurrency, the production
    watermark (its upper end when it is a range) and the knee (or red line) level."""
    levels: set[int] = set()
    if knee.max_concurrency:
        levels.add(int(knee.max_concurrency))
    if isinstance(watermark, list | tuple) and watermark:
        watermark = max(watermark)
    if isinstance(watermark, int | float) and not isinstance(watermark, bool) and watermark > 0:
        levels.add(int(watermark))
    top = knee.knee_users or knee.red_line_users
    if top:
        levels.add(int(top))
    return tuple(sorted(levels))


def _step(summary: pd.DataFrame, users: int) -> pd.Series | None:
    rows = level_rows(summary)
    rows = rows[rows["target_users"] == users]
    return None if rows.empty else rows.sort_values("stage").iloc[-1]


def _recommended(before: KneeResult, after: KneeResult) -> Check:
    users = before.max_concurrency
    if users is None:
        return Check("recommended_level", False, "the original run recommends no max_concurrency")
    verdict = next((v for v in after.stages if v.target_users == users), None)
    if verdict is None:
        return Check("recommended_level", False, f"{users} users were not measured again", users)
    ok = verdict.verdict in ("comfortable", "critical")
    why = "; ".join(reasons_text(verdict)[:2])
    return Check(
        "recommended_level",
        ok,
        f"max_concurrency {users} is {verdict.verdict.replace('_', ' ')} in the re-run "
        f"({'comfortable or critical needed' if not ok else 'as recommended'}: {why})",
        users,
        verdict=verdict.verdict,
    )


def _busiest(overloaded: Sequence[SharedHostFact], users: int) -> SharedHostFact | None:
    """The fact with the highest load per CPU at ``users`` (None: not overloaded there)."""
    at = [f for f in overloaded if f.users == users]
    return max(at, key=lambda f: f.host_load_1m / f.host_cpus, default=None)


def _throughput(
    before_summary: pd.DataFrame,
    after_summary: pd.DataFrame,
    users: int | None,
    tolerance_pct: float,
    overloaded: Sequence[SharedHostFact] = (),
) -> Check:
    if users is None:
        return Check("throughput", False, "the original run recommends no max_concurrency")
    b, a = _step(before_summary, users), _step(after_summary, users)
    x_b = num(b["output_tok_s"]) if b is not None else None
    x_a = num(a["output_tok_s"]) if a is not None else None
    if x_b is None or x_a is None or x_b <= 0:
        which = "original" if x_b is None else "re-run"
        return Check(
            "throughput", False, f"no output tok/s at {users} users in the {which}", users,
            before_tok_s=x_b, after_tok_s=x_a,
        )  # fmt: skip
    hw_b = num(b.get("output_tok_s_hw_pct")) if b is not None else None
    hw_a = num(a.get("output_tok_s_hw_pct")) if a is not None else None
    band = math.hypot(hw_b or 0.0, hw_a or 0.0)
    allowed = max(band, tolerance_pct)
    moved = (x_a / x_b - 1.0) * 100.0
    ok = abs(moved) <= allowed
    interval = f" ±{hw_b:.1f} %" if hw_b is not None else ""
    busy = None if ok else _busiest(overloaded, users)
    machine = (
        ""
        if busy is None
        else f"; the machine was overloaded at {users} users (load {busy.host_load_1m:.1f} on "
        f"{busy.host_cpus} CPUs, the server on {busy.server_host}): the figure is the machine's, "
        "re-run where the server has the CPU to itself"
    )
    return Check(
        "throughput",
        ok,
        f"{users} users served {sig4(x_a)} output tok/s against {sig4(x_b)}{interval} before: "
        f"{moved:+.1f} % (allowed ±{allowed:.1f} %: the intervals combined, at least "
        f"{tolerance_pct:g} %){machine}",
        users,
        before_tok_s=x_b,
        before_hw_pct=hw_b,
        after_tok_s=x_a,
        moved_pct=moved,
        allowed_pct=allowed,
        overloaded=busy,
    )


def _no_red_line(before: KneeResult, after: KneeResult) -> Check:
    if before.knee_users is not None:
        top = before.knee_users
        below = [v for v in after.stages if v.target_users < top]
        where = f"below the knee ({top} users)"
    else:
        top = before.max_concurrency or 0
        below = [v for v in after.stages if v.target_users <= top]
        where = f"at or below max_concurrency {top}"
    red = [v.target_users for v in below if v.verdict == "red_line"]
    if not below:
        return Check("no_red_line_below_knee", False, f"no stage {where} was measured again", top)
    checked = [v.target_users for v in below]
    return Check(
        "no_red_line_below_knee",
        not red,
        f"red line at {red} users, {where}"
        if red
        else f"no red line {where} ({checked} users measured)",
        top,
        checked_users=tuple(checked),
        red_line_users=tuple(red),
    )


def verify_checks(
    before_summary: pd.DataFrame,
    before_knee: KneeResult,
    after_summary: pd.DataFrame,
    after_knee: KneeResult,
    *,
    tolerance_pct: float = TOLERANCE_PCT,
    overloaded: Sequence[SharedHostFact] = (),
) -> tuple[Check, ...]:
    """The checks of the module docstring, in order (pure); ``overloaded``: both runs'
    :func:`~analysis.diagnosis.failures.overloaded_stages`."""
    users = before_knee.max_concurrency
    return (
        _recommended(before_knee, after_knee),
        _throughput(before_summary, after_summary, users, tolerance_pct, overloaded),
        _no_red_line(before_knee, after_knee),
    )


def overall(checks: Sequence[Check]) -> str:
    """``FAIL`` if a check failed, else ``CANNOT TELL`` if one could not tell, else ``PASS``."""
    outcomes = {c.outcome for c in checks}
    return next((o for o in ("FAIL", "CANNOT TELL") if o in outcomes), "PASS")


def format_checks(checks: Sequence[Check]) -> str:
    """One ``PASS``/``FAIL``/``CANNOT TELL`` line per check, then the overall result."""
    lines = [f"{c.outcome}  {c.name}: {c.text}" for c in checks]
    passed = sum(c.passed for c in checks)
    lines.append(f"verify: {overall(checks)} ({passed} of {len(checks)} checks passed)")
    return "\n".join(lines)


def all_passed(checks: Sequence[Check]) -> bool:
    return all(c.passed for c in checks)


#: ``loadknee verify``'s exit status per :func:`overall` result (3: as ``loadknee analyze``'s
#: "cannot tell")
EXIT_CODES = {"PASS": 0, "FAIL": 1, "CANNOT TELL": 3}
