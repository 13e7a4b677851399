"""A ratchet on prose inside the judgement: f-strings with words in ``analysis/knee``,
``analysis/advice``, ``analysis/diagnosis``, ``analysis/slo`` and ``analysis/stages``.

The knee's judgement returns facts (:mod:`analysis.knee.facts`); its words are written by
:mod:`analysis.report.knee_words`; the diagnosis's (:mod:`analysis.diagnosis.facts`) by
:mod:`analysis.report.diagnosis_words`; the SLO verdicts' (:mod:`analysis.slo.facts`) by
:mod:`analysis.report.slo_words`; the stages' (a run cut, the baseline's warnings, the rate
knee) by :mod:`analysis.report.stage_words` and :mod:`analysis.report.rate_words`. Every
f-string whose literal parts hold a word (two letters or more, outside a plain identifier such as
a column name ``e2e_{p}_ms``) is counted here; the count may fall, never rise. When you move a
sentence out, lower :data:`LIMIT` to the new count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the judgement packages held to the ratchet, and the most f-strings with words each may keep
#: (analysis/knee's last one is an exception's message: KneeInputs.with_columns misused;
#: the SLO targets' parser, whose refusals of a malformed --slo are words, moved to
#: loadknee_core/slo_targets.py: a parser's error messages, not a verdict; analysis/predict's
#: three are ``loadknee predict``'s argument errors, in its cli module)
LIMIT = {
    "analysis/knee": 1,
    "analysis/advice": 0,
    "analysis/diagnosis": 0,
    "analysis/slo": 0,
    "analysis/stages": 0,
    "analysis/predict": 3,
}
WORD = re.compile(r"[A-Za-z]{2,}")
IDENTIFIER = re.compile(r"^\w*$")


def sentences(tree: ast.AST) -> list[int]:
    """The lines of the f-strings with words in ``tree`` (format specs are not f-strings)."""
    specs = {
        id(node.format_spec)
        for node in ast.walk(tree)
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr) or id(node) in specs:
            continue
        parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
        if any(isinstance(p, str) and WORD.search(p) and not IDENTIFIER.match(p) for p in parts):
            lines.append(node.lineno)
    return lines


def offenders(package: str) -> list[str]:
    """``path:line`` of each f-string with words in ``package``."""
    return [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in sentences(ast.parse(path.read_text(encoding="utf-8")))
    ]


def test_the_judgement_builds_no_more_sentences_than_it_did() -> None:
    for package, limit in LIMIT.items():
        found = offenders(package)
        assert len(found) <= limit, f"{package}: {len(found)} f-strings with words:\n" + "\n".join(
            found
        )


def test_the_counter_sees_a_sentence_and_skips_a_column_name() -> None:
    tree = ast.parse('a = f"e2e_{p}_ms"\nb = f"{x:.1f} requests waited"\nc = f"{y:,.0f}"\n')
    assert sentences(tree) == [2]
