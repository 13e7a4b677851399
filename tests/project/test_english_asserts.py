"""A ratchet on tests that pin English: ``assert`` statements outside the golden tests that
compare an output with a phrase (``assert "the tail has departed" in said``, ``assert out ==
"Latency-bound"``, ``assert line.startswith("knee at")``).

The judgement returns facts (:mod:`analysis.knee.facts`, :mod:`analysis.diagnosis.facts`,
:mod:`analysis.slo.facts`, the ``fact`` of each signal in knee.json, its ``answer`` and
``standing``) and :mod:`analysis.report` words them. Only the golden tests
(``tests/analysis/report/test_golden_*.py``, regenerated with ``LOADKNEE_UPDATE_GOLDEN=1``) pin
those words; every other test asserts on kinds, values, bounds, exit codes and rule ids, so a
rewording breaks one golden file, not dozens of tests that say nothing about the answer.

A phrase is a string literal (or an f-string's literal parts) holding two words of two letters or
more (or one capitalised hyphenated label, ``Latency-bound``); an identifier (a column name
``ttft_p95_ms``), a lower-case kind (``prefix-cache``), a flag (``--max-num-seqs 24``), markup
and a file name (``knee.json``, ``out/record.md``) hold none. An assert counts when it compares
a phrase with ``in``, ``not in``, ``==`` or ``!=``, or passes one to ``startswith``/``endswith``,
unless the tests wrote that phrase themselves (outside an assert, in the same file or in
tests/support: a fake server's error read back is the test's input, not our wording).

Where the English IS the product (an error message a user reads for bad input, ``--help``, the
docs, a warning), the assert carries the marker comment ``# words are the product`` on one of its
lines or on the line above it, with the reason after it, and is not counted. The count may fall,
never rise: when you turn an assert into a value check, lower :data:`LIMIT` to the new count.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
#: the most phrase asserts the tests may keep outside the golden tests
LIMIT = 0
#: the tests whose job is to pin the words, and this file (its self-test holds phrases)
GOLDEN = re.compile(
    r"^tests/analysis/report/test_golden_\w+\.py$|^tests/project/test_english_asserts\.py$"
)
#: the marker of an assert whose English is what it tests (an error message, help, the docs)
MARKER = "# words are the product"
#: a word: letters, perhaps wrapped in quotes, brackets or punctuation ("(default", "said:")
WORD = re.compile(r"^[(\[\"'`]*[A-Za-z]{2,}(['’][a-z]+)?[)\]\"'`,.:;!?]*$")
#: a capitalised hyphenated word is a label written for a reader ("Latency-bound"); a lower-case
#: one is a kind or a name ("prefix-cache", "sim-llm")
LABEL = re.compile(r"^[A-Z][a-z]+(-[a-z]+)+$")
#: markup around words: tags and attributes ('<td class="n">', 'model_name="m"')
MARKUP = re.compile(r"<[^>]*>|\w+=(\"[^\"]*\"|'[^']*')")
COMPARING = (ast.In, ast.NotIn, ast.Eq, ast.NotEq)
AFFIXES = {"startswith", "endswith"}


def is_phrase(text: str) -> bool:
    """Whether ``text`` reads as English: two words or more, or one capitalised hyphenated label.
    Names (``ttft_p95_ms``, ``prefix-cache``), flags (``--max-num-seqs 24``), file names
    (``knee.json``), URLs and markup hold no word."""
    tokens = MARKUP.sub(" ", text).split()
    words = sum(bool(WORD.match(t)) for t in tokens)
    return words >= 2 or any(LABEL.match(t.strip(".,:;")) for t in tokens)


def literal_text(node: ast.expr) -> str | None:
    """The words a literal holds: a string, an f-string's fixed parts, or the first phrase of a
    tuple/list/set of them (``out in ("a b", "c d")``) or of a conditional's two."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return " ".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    if isinstance(node, ast.IfExp):  # ("Latency-bound" if latency else "Throughput-bound")
        return literal_text(ast.Tuple([node.body, node.orelse]))
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        texts = [literal_text(e) for e in node.elts]
        phrases = [t for t in texts if t is not None and is_phrase(t)]
        return phrases[0] if phrases else None
    return None


def inputs(tree: ast.AST) -> list[str]:
    """The phrases a file writes outside its asserts: the tests' own input (a fake server's
    error, a line it prints), which an assert that finds it echoed back pins no wording of ours.
    Whitespace is folded, as a reader of the output folds it."""
    in_asserts = {
        id(node)
        for test in ast.walk(tree)
        if isinstance(test, ast.Assert)
        for node in ast.walk(test)
    }
    return [
        " ".join(node.value.split())
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in in_asserts
        and is_phrase(node.value)
    ]


def holds_phrase(node: ast.expr, echoed: list[str]) -> bool:
    text = literal_text(node)
    if text is None or not is_phrase(text):
        return False
    text = " ".join(text.split())
    return not any(text in given for given in echoed)


def pins_words(test: ast.expr, echoed: list[str]) -> bool:
    """Whether an assert's test compares an output with a phrase that is not the test's input."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and any(isinstance(op, COMPARING) for op in node.ops):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in AFFIXES:
            sides = node.args
        else:
            continue
        if any(holds_phrase(side, echoed) for side in sides):
            return True
    return False


def phrase_asserts(source: str, given: Sequence[str] = ()) -> list[int]:
    """The lines of the asserts in ``source`` that pin English, not found in its own input nor in
    ``given`` (tests/support's), and carry no :data:`MARKER`."""
    lines = source.splitlines()
    tree = ast.parse(source)
    echoed = [*inputs(tree), *given]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert) or not pins_words(node.test, echoed):
            continue
        end = node.end_lineno or node.lineno
        if not any(MARKER in lines[i - 1] for i in range(node.lineno - 1, end + 1)):
            found.append(node.lineno)
    return sorted(found)


def offenders() -> list[str]:
    """``path:line`` of each phrase assert in tests/ outside the golden tests."""
    support = [
        phrase
        for path in sorted((TESTS / "support").rglob("*.py"))
        for phrase in inputs(ast.parse(path.read_text(encoding="utf-8")))
    ]
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if GOLDEN.match(name):
            continue
        lines = phrase_asserts(path.read_text(encoding="utf-8"), support)
        found += [f"{name}:{line}" for line in lines]
    return found


def test_no_more_tests_pin_english_than_did() -> None:
    found = offenders()
    assert len(found) <= LIMIT, f"{len(found)} asserts on English phrases:\n" + "\n".join(found)


def test_the_counter_sees_a_phrase_and_skips_names_flags_and_files() -> None:
    source = (
        'assert "the tail has departed" in said\n'
        'assert "ttft_p95_ms" in frame.columns\n'
        'assert "--max-num-seqs" in flags\n'
        'assert "knee.json" in names\n'
        'assert out.startswith(f"knee at {n} users")\n'
        'assert "Latency-bound" == label\n'
        'assert "no such file" in err  # words are the product: the refusal a user reads\n'
        "# words are the product: the --help a user reads\n"
        'assert "show this help" in out\n'
        'fake = "engine died"\n'
        'assert "engine died" in said\n'
    )
    assert phrase_asserts(source) == [1, 5, 6]
    assert phrase_asserts(source.replace("# words are", "# words were")) == [1, 5, 6, 7, 9]
