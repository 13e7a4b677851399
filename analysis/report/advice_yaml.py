"""``recommendations.yaml``: the settings as a YAML snippet, each value under its reason.

The reasons are written by :mod:`analysis.report.advice_words` from the advice's facts; values and
comments go through :mod:`analysis.report.yaml_text`, so every reader parses them back exactly.
"""

from __future__ import annotations

import textwrap

from analysis.advice.facts import Recommendations
from analysis.advice.recommend import flag_text
from analysis.model import KneeResult
from analysis.report import yaml_text
from analysis.report.advice_words import is_conditional, reason_text, withheld_text
from analysis.report.answer_view import answer_view, answer_words
from analysis.report.stage_words import provisional_text


def _answer_comment(recs: Recommendations, knee: KneeResult | None) -> list[str]:
    """The deploy figure and the capacity with its interval, as every output says them."""
    if knee is None or recs.deploy is None or recs.deploy.users is None:
        return []
    text = answer_words(answer_view(knee, recs))
    return [f"# {t}" for t in textwrap.wrap(yaml_text.comment(text), 96)]


def _flag_comments(recs: Recommendations) -> list[str]:
    """The flags to set on one line; a flag to try (re-run to measure) on its own."""
    tries = [flag_text(i) for i in recs.items if is_conditional(i) and i.value is not None]
    ready = [f for f in recs.server_flags if f not in tries]
    out = [yaml_text.comment("# server flags: " + " ".join(ready))] if ready else []
    if tries:
        out.append(yaml_text.comment("# to try, then re-run to measure: " + " ".join(tries)))
    return out


def to_yaml(recs: Recommendations, knee: KneeResult | None = None) -> str:
    """A YAML config snippet: ``server:`` and ``vllm:`` maps, each key under its reason, the
    answer (``knee``: with its capacity interval) in a comment on top.

    Values go through :mod:`analysis.report.yaml_text` (strings quoted, NaN / inf / numpy numbers in
    forms every reader parses back), reasons through its comment cleaner: a reason is text a
    YAML reader must never see as data.
    """
    sections: dict[str, list[str]] = {"server": [], "vllm": []}
    for item in recs.items:
        section, _, name = item.key.rpartition(".")
        lines = sections.setdefault(section or "server", [])
        for text in textwrap.wrap(yaml_text.comment(reason_text(item)), 94):
            lines.append(f"  # {text}")
        lines.append(f"  {yaml_text.key(name)}: {yaml_text.value(item.value)}")
    out = [
        "# loadknee recommendations: each value follows its reason",
        *_answer_comment(recs, knee),
    ]
    if recs.provisional:
        out += [
            f"# PROVISIONAL: {t}"
            for t in textwrap.wrap(yaml_text.comment(provisional_text(recs.provisional)), 90)
        ]
    for section, lines in sections.items():
        if lines:
            out += [f"{yaml_text.key(section)}:", *lines]
    for note in recs.withheld:
        for text in textwrap.wrap(yaml_text.comment(withheld_text(note)), 96):
            out.append(f"# {text}")
    out += _flag_comments(recs)
    return "\n".join(out) + "\n"
