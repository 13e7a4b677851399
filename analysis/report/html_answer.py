"""report.html's answer: the deploy figure and the capacity in tiles, the deploy line and its why.

The deploy figure first, then the capacity with its interval, the first stage past it and the
other figures, each tile's ``data-name`` its name in docs/method.md and ``data-value`` its
figure; under them the deploy sentence and the answer's one line of why.
"""

from __future__ import annotations

from typing import Any

from analysis.advice.facts import Recommendations
from analysis.model import KneeResult
from analysis.report.advice_words import deploy_bound_text, deploy_text
from analysis.report.answer_view import AnswerView, answer_view, interval_words
from analysis.report.html_kit import card, esc, figure


def _watermark_hint(share: tuple[float, float] | None) -> str:
    """``70–80 % of base capacity``, the shares the watermark was computed with."""
    if share is None:
        return "a share of base capacity"
    low, high = share
    return f"{low * 100:g}–{high * 100:g} % of base capacity"


def _capacity_hint(view: AnswerView) -> str:
    """The capacity tile's small print: its interval, or why it shows none beside it."""
    if view.cannot_tell:
        return "cannot tell (see why); " + interval_words(view)
    if view.capacity is not None and not view.reached:
        return "not reached: untested above; " + interval_words(view)
    return interval_words(view)


def _tiles(
    knee: KneeResult | None, recs: Recommendations | None, share: tuple[float, float] | None
) -> list[tuple[str, str, Any, str]]:
    """Each tile's name, title, figure and small print, in the order they stand."""
    view = answer_view(knee, recs)
    bound = ""
    if recs is not None and recs.deploy is not None:
        bound = deploy_bound_text(recs.deploy)
    past = f"first stage past capacity ({view.past})" if view.past else "first stage past capacity"
    told = f"concurrent requests to configure; bound by {bound}" if bound else "no figure"
    tiles: list[tuple[str, str, Any, str]] = [
        ("deploy", "deploy", view.deploy, told),
        ("capacity", "capacity", view.capacity, _capacity_hint(view)),
        ("past", past, view.past_users, "users: where the limit broke"),
        ("base_capacity", "base capacity",
         None if knee is None or view.cannot_tell else knee.base_capacity,
         "tail/memory/success ok"),
    ]  # fmt: skip
    if knee is not None and knee.red_line_users is not None and view.past != "red line":
        tiles.append(("red_line", "red line", knee.red_line_users, "errors, OOM, timeouts"))
    marks = [] if recs is None else [i.value for i in recs.items if "watermark" in i.key]
    if marks:
        tiles.append(("watermark", "production watermark", marks[0], _watermark_hint(share)))
    return tiles


def answer_html(
    knee: KneeResult | None,
    recs: Recommendations | None,
    *,
    watermark_share: tuple[float, float] | None = None,
    why: str = "",
) -> str:
    """The tiles, the deploy sentence and the line of why (``why`` without its "why: ")."""
    tiles = "".join(
        card(title, "none" if value is None else figure(value), hint,
             attrs=f' data-name="{name}" data-value="{esc("" if value is None else value)}"')
        for name, title, value, hint in _tiles(knee, recs, watermark_share)
    )  # fmt: skip
    deploy = ""
    if recs is not None and recs.deploy is not None:
        deploy = f'<p class="deploy"><b>Deploy:</b> {esc(deploy_text(recs.deploy))}</p>'
    said = f'<p class="why"><b>Why:</b> {esc(why)}</p>' if why else ""
    return f'<div class="cards">{tiles}</div>{deploy}{said}'
