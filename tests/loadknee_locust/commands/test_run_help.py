"""``loadknee run --help`` (the common options, short) and ``--help-all`` (every option once)."""

from __future__ import annotations

import argparse
import re
from collections import Counter

import pytest

from loadknee_locust.commands import run as runcli
from loadknee_locust.plugin.options import option_specs

#: an option line of argparse's help: two spaces, then the option's spellings
OPTION_LINE = re.compile(r"^  (-[^\s,]+(?: [^\s,-][^\s,]*)?(?:, -[^\s,]+(?: [^\s,-][^\s,]*)?)*)")


def shown_options(text: str) -> Counter[str]:
    """How often each option opens a line of ``text`` (its spellings, placeholders dropped)."""
    seen: Counter[str] = Counter()
    for line in text.splitlines():
        found = OPTION_LINE.match(line)
        if found:
            for part in found.group(1).split(", "):
                seen[part.split(" ")[0]] += 1
    return seen


def help_of(flag: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert runcli.main([flag]) == 0
    return capsys.readouterr().out


def every_action() -> list[argparse.Action]:
    parsed = [a for a in runcli.build_parser()._actions if a.option_strings]
    return parsed + list(runcli.passed_through())


def test_help_is_short_and_names_each_option_once(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of("--help", capsys)
    lines = text.splitlines()
    assert len(lines) <= 80
    shown = shown_options(text)
    assert shown and max(shown.values()) == 1
    assert not [flag for flag in shown if flag.startswith("--llm-")]
    listed = {f for flags in runcli.COMMON_FLAGS.values() for f in flags}
    assert listed <= set(shown)
    assert lines[-1] == f"all {len(every_action())} options: loadknee run --help-all"


def test_help_all_lists_every_option_the_parser_takes_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = shown_options(help_of("--help-all", capsys))
    taken = {flag for action in every_action() for flag in action.option_strings}
    assert set(shown) == taken
    assert max(shown.values()) == 1
    # every plugin option once: under its short name, or as --llm-* where run has none
    short = {n for names in runcli.SHORT_OPTIONS for n in names}
    for spec in option_specs():
        spelt = spec.flag in shown
        assert spelt != (spec.name in short or spec.name in ("no_stream", "no_refine")), spec.name


def test_no_placeholder_is_a_dest_name(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of("--help-all", capsys)
    for action in every_action():
        if action.nargs == 0 or action.choices:
            continue
        for flag in action.option_strings:
            assert not re.search(rf"{re.escape(flag)} {action.dest.upper()}\b", text), flag


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("One. Two.", "One"),
        ("server URL, e.g. http://h; more", "server URL, e.g. http://h"),
        ("Levels (default 1,2; the short one: 1). More", "Levels (default 1,2; the short one: 1)"),
        ("no stop", "no stop"),
    ],
)
def test_the_brief_help_keeps_the_first_sentence(text: str, first: str) -> None:
    assert runcli.first_sentence(text) == first
