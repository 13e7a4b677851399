"""``recommendations.yaml``: the settings as a YAML snippet, each value under its reason.

The reasons are written by :mod:`analysis.report.advice_words` from the advice's facts; values and
comments go through :mod:`analysis.report.yaml_text`, so every reader parses them back exactly.
"""

from __future__ import annotations

import textwrap

from analysis.model import Recommendations
from analysis.report import yaml_text
from analysis.report.advice_words import reason_text, withheld_text
from analysis.report.stage_words import provisional_text


def to_yaml(recs: Recommendations) -> str:
    """A YAML config snippet: ``server:`` and ``vllm:`` maps, each key under its reason.

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
    out = ["# loadknee recommendations: each value follows its reason"]
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
    if recs.server_flags:
        out.append(yaml_text.comment("# server flags: " + " ".join(recs.server_flags)))
    return "\n".join(out) + "\n"
