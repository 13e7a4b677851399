"""The one answer every output shows: the deploy figure, the capacity with its 90 % interval and
the first stage past the capacity, under the names of docs/method.md's "Names" table.

The screen, ``--explain``, record.md, report.html (its tiles and the plots' markers), knee.json
and recommendations.yaml read these figures from :func:`answer_view`, so they cannot disagree.
The capacity is the stages' answer (``max_concurrency``: the highest tested level before the
first stage past it); the fit over all stages (:mod:`analysis.knee.fit`) gives its interval.
An interval shown beside the capacity contains it, or :func:`capacity_words` says in words that
the fit disagrees: an interval that excludes the answer is never printed bare. Where the answer
is "cannot tell" no capacity stands (the stages' point figure is the noise's pick): every output
shows none, and the fit's interval as the fit's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from analysis.advice.facts import Recommendations
from analysis.knee.facts import ConfidenceFact
from analysis.knee.fit import whole
from analysis.model import KneeResult
from loadknee_core.numeric import counted, fmt_share


@dataclass(frozen=True)
class AnswerView:
    """The figures of the one answer (``None``: not found)."""

    deploy: int | None  # deploy_concurrency: what to configure
    capacity: int | None  # max_concurrency: the highest tested level before the first past it
    reached: bool  # a knee or red line bounds it (else it is the top tested level, untested above)
    fit: float | None  # the fit over all stages' breakpoint
    low: float | None  # its 90 % interval
    high: float | None
    past_users: int | None  # the first stage past the capacity (the knee stage or the red line)
    past: Literal["knee", "red line"] | None
    agree_pct: float | None  # share of resamples giving the same capacity
    red_line_users: int | None = None  # the red line, also when the knee stage came first
    cannot_tell: bool = False  # the answer's standing: no capacity, no stage past it
    # the stages setting the answer that were too short to resample (no confidence figure)
    unresampled: tuple[int, ...] = ()

    @property
    def interval(self) -> tuple[int, int] | None:
        """The capacity interval in whole users, as printed (None: no fit found a plateau)."""
        if self.low is None or self.high is None or self.fit is None:
            return None
        mid = whole(self.fit)
        return min(whole(self.low), mid), max(whole(self.high), mid)

    @property
    def contains(self) -> bool | None:
        """Whether the printed interval holds the capacity (None: no interval or no capacity)."""
        if self.interval is None or self.capacity is None:
            return None
        low, high = self.interval
        return low <= self.capacity <= high

    def as_json(self) -> dict[str, Any]:
        """knee.json's ``answer``: the same figures, the names of docs/method.md."""
        return {
            "deploy_concurrency": self.deploy,
            "capacity": self.capacity,
            "capacity_reached": self.reached,
            "capacity_interval": None if self.interval is None else list(self.interval),
            "interval_contains_capacity": self.contains,
            "first_past_capacity_users": self.past_users,
            "first_past_capacity": self.past,
        }


def answer_view(knee: KneeResult | None, recs: Recommendations | None) -> AnswerView:
    """The answer's figures, read from the knee and the advice."""
    deploy = None if recs is None or recs.deploy is None else recs.deploy.users
    if knee is None:
        return AnswerView(deploy, None, False, None, None, None, None, None, None)
    if recs is not None and recs.cannot_tell:
        return AnswerView(
            deploy=None,
            capacity=None,
            reached=False,
            fit=knee.capacity,
            low=knee.capacity_low,
            high=knee.capacity_high,
            past_users=None,
            past=None,
            agree_pct=None,
            red_line_users=knee.red_line_users,
            cannot_tell=True,
        )
    past: Literal["knee", "red line"] | None = None
    past_users = knee.knee_users
    if past_users is not None:
        past = "knee"
    elif knee.red_line_users is not None:
        past, past_users = "red line", knee.red_line_users
    return AnswerView(
        deploy=deploy,
        capacity=knee.max_concurrency,
        reached=past is not None,
        fit=knee.capacity,
        low=knee.capacity_low,
        high=knee.capacity_high,
        past_users=past_users,
        past=past,
        agree_pct=knee.confidence_pct,
        red_line_users=knee.red_line_users,
        # words read back from knee.json carry no stages: no parenthesis, and no false share
        unresampled=(
            knee.confidence.unresampled if isinstance(knee.confidence, ConfidenceFact) else ()
        ),
    )


def span_words(interval: tuple[int, int]) -> str:
    """``7–8``, or one number when the interval is one user."""
    low, high = interval
    return f"{low}" if low == high else f"{low}–{high}"


def interval_words(view: AnswerView) -> str:
    """The interval beside the capacity, or why there is none or it is not shown beside it."""
    if view.interval is None or view.fit is None:
        return "no capacity interval (the fit over all stages found no plateau)"
    span = span_words(view.interval)
    if view.contains:
        return f"90 % interval {span}"
    if view.capacity is None:
        return f"the fit over all stages: {whole(view.fit)}, 90 % interval {span}"
    return (
        f"the fit over all stages disagrees: {whole(view.fit)}, 90 % interval {span}, which "
        "leaves the capacity out"
    )


def capacity_words(view: AnswerView) -> str:
    """The capacity in one phrase: its figure, its interval (or why not), how often the
    resamples agree and the first stage past it."""
    if view.cannot_tell:
        return f"no capacity: cannot tell; {interval_words(view)}"
    if view.capacity is None:
        return "no capacity: no stage could be judged"
    if view.reached:
        head = f"capacity {view.capacity}"
    else:
        head = f"capacity not reached up to {view.capacity}"
    parts = [head]
    if view.agree_pct is not None:
        parts[0] += f" ({fmt_share(view.agree_pct)} of resamples agree)"
    elif view.unresampled:
        parts[0] += f" ({unresampled_words(view.unresampled)})"
    parts.append(interval_words(view))
    if view.past_users is not None and view.past is not None:
        parts.append(f"first stage past it: {counted(view.past_users, 'user')} ({view.past})")
    return "; ".join(parts)


def unresampled_words(users: tuple[int, ...]) -> str:
    """Why a capacity has no confidence figure: the stages that set it had no time windows to
    resample (their figures held in every resample, so a share would measure nothing)."""
    levels = " and ".join(str(u) for u in users)
    stages = "stage" if len(users) == 1 else "stages"
    were = "was" if len(users) == 1 else "were"
    return f"no confidence figure: its {stages} at {levels} users {were} too short to resample"


def answer_words(view: AnswerView) -> str:
    """The answer in one line: the deploy figure, then :func:`capacity_words`."""
    deploy = "no deploy figure" if view.deploy is None else f"deploy {view.deploy}"
    return f"the answer: {deploy}; {capacity_words(view)}"


def answer_note(view: AnswerView) -> str:
    """The header line of a file written from the answer (the cluster files): the same figures,
    and where their names are defined, so a threshold's evidence can be read against them."""
    return f"{answer_words(view)} (the names of docs/method.md)"


def capacity_stage_words(view: AnswerView) -> str:
    """The capacity's stage, named as docs/method.md names it (a per-stage figure's evidence)."""
    if view.capacity is None:
        return "the capacity's stage: none (no stage could be judged)"
    return f"the capacity's stage (max_concurrency), {counted(view.capacity, 'user')}"


def knee_stage_words(view: AnswerView) -> str:
    """The knee stage, the first stage past the capacity, named as docs/method.md names it."""
    users = view.past_users if view.past == "knee" else None
    if users is None:
        return "the knee stage: none within the tested range"
    return f"the knee stage, the first past the capacity, {counted(users, 'user')}"


def mark_labels(view: AnswerView) -> dict[str, str]:
    """The plots' marks of the answer, by the ``gid`` each artist carries, with the label its
    legend shows (:func:`analysis.report.plots._mark_answer`); report.html's captions of those
    plots say the same words, so a reader (and a browser test) can read the marks off the page."""
    out: dict[str, str] = {}
    if view.interval is not None and view.low is not None and view.high is not None:
        what = "capacity 90 % interval" if view.contains else "fit's 90 % interval (disagrees)"
        if view.capacity is None:  # "cannot tell": the fit's own, nothing to disagree with
            what = "fit's 90 % interval"
        out["capacity_interval"] = f"{what} ({span_words(view.interval)})"
    if view.capacity is not None:
        name = "capacity = deploy" if view.deploy == view.capacity else "capacity"
        if not view.reached:
            name += ", untested above"
        out["capacity"] = f"{name} ({view.capacity})"
    if view.deploy is not None and view.deploy != view.capacity:
        out["deploy"] = f"deploy ({view.deploy})"
    if view.past_users is not None and view.past is not None:
        out["past"] = f"first past capacity: {view.past} ({view.past_users})"
    if view.red_line_users is not None and view.past != "red line":
        out["red_line"] = f"red line ({view.red_line_users})"
    return out
