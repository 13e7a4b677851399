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
    """Every option the help lists (the ``--llm-*`` aliases ``run`` takes are hidden)."""
    parsed = runcli.build_parser()._actions
    shown = [a for a in parsed if a.option_strings and a.help != argparse.SUPPRESS]
    return shown + list(runcli.passed_through())


def test_help_is_short_and_names_each_option_once(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of("--help", capsys)
    lines = text.splitlines()
    assert len(lines) <= 80
    shown = shown_options(text)
    assert shown and max(shown.values()) == 1
    assert not [flag for flag in shown if flag.startswith("--llm-")]
    listed = {f for flags in runcli.COMMON_FLAGS.values() for f in flags}
    assert listed <= set(shown)
    # words are the product: the --help a user reads
    assert lines[-1] == f"all {len(every_action())} options: loadknee run --help-all"


def test_help_all_lists_every_option_the_parser_takes_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = shown_options(help_of("--help-all", capsys))
    taken = {flag for action in every_action() for flag in action.option_strings}
    assert set(shown) == taken
    assert max(shown.values()) == 1
    # every plugin option once, under its short name; its --llm-* spelling taken, not shown
    taken_all = {f for a in runcli.build_parser()._actions for f in a.option_strings}
    for spec in option_specs():
        assert spec.run_flags[0] in shown and spec.flag not in shown, spec.name
        assert spec.flag in taken_all, spec.name
    assert not [flag for flag in shown if flag.startswith("--llm-")]


def test_each_short_name_and_its_llm_alias_give_the_same_locust_command() -> None:
    """``--no-ignore-eos`` and ``--llm-no-ignore-eos`` (an on/off option: its flag alone),
    ``--temperature 0.5`` and ``--llm-temperature 0.5``: one and the same command."""
    parser = runcli.build_parser()

    def cmd(*argv: str) -> list[str]:
        args, unknown = parser.parse_known_args(["--host", "http://h", *argv])
        assert unknown == []
        return runcli.locust_command(args, unknown)[5:]  # after python -m locust -f FILE

    short = cmd("--no-ignore-eos", "--temperature", "0.5", "--gpu", "none", "--seed", "7")
    aliased = cmd(
        "--llm-no-ignore-eos", "--llm-temperature", "0.5", "--llm-gpu", "none", "--llm-seed", "7"
    )
    assert short == aliased
    assert "--llm-no-ignore-eos" in short and "--llm-ignore-eos" not in short
    assert short[short.index("--llm-temperature") + 1] == "0.5"
    assert short[short.index("--llm-seed") + 1] == "7"
    assert runcli._options(parser.parse_known_args(["--no-ignore-eos"])[0]).ignore_eos is False


def test_options_that_exclude_each_other_are_declared_so() -> None:
    sets = {names for names in runcli.SHORT_OPTIONS if len(names) > 1}
    assert ("stage_seconds", "stage_requests") in sets
    assert {n for names in sets for n in names} >= {"rates", "arrival_log", "replay_curve"}
    with pytest.raises(SystemExit):
        runcli.build_parser().parse_known_args(["--rates", "1", "--arrival-log", "a.jsonl"])


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
