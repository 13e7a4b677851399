"""recommendations.yaml round-trips through PyYAML: adversarial values come back equal, and
every reason stays as a comment above its key."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.advice.facts import Recommendation, Recommendations
from analysis.report import yaml_text
from analysis.report.advice_yaml import to_yaml

LONG = "x" * 5000 + ": # " + "é" * 3000
#: (name, value written, value PyYAML must read back)
ADVERSARIAL = [
    ("newline", "a\nb\r\nc", "a\nb\r\nc"),
    ("double_quote", 'say "hi"', 'say "hi"'),
    ("single_quote", "it's", "it's"),
    ("backslash", "C:\\path\\n", "C:\\path\\n"),
    ("colon_space", "key: value", "key: value"),
    ("hash", "a # not a comment", "a # not a comment"),
    ("leading_marks", "- [x] {y} &z *w !t |", "- [x] {y} &z *w !t |"),
    ("spaces", "  padded  ", "  padded  "),
    ("tab_and_nul", "a\tb\0c\x07", "a\tb\0c\x07"),
    ("unicode", "naïve 日本語 🚀 ≤ 85 %", "naïve 日本語 🚀 ≤ 85 %"),
    ("line_separators", "a\u2028b\u2029c\x85d\ufeffe", "a\u2028b\u2029c\x85d\ufeffe"),
    ("looks_like_bool", "no", "no"),
    ("looks_like_null", "null", "null"),
    ("looks_like_number", "1e3", "1e3"),
    ("empty_string", "", ""),
    ("none", None, None),
    ("pandas_na", pd.NA, None),
    ("true", True, True),
    ("false", False, False),
    ("numpy_bool", np.bool_(True), True),
    ("nan", math.nan, math.nan),
    ("numpy_nan", np.float64("nan"), math.nan),
    ("inf", math.inf, math.inf),
    ("minus_inf", -math.inf, -math.inf),
    ("numpy_int64", np.int64(2**40 + 1), 2**40 + 1),
    ("numpy_float64", np.float64(0.1) + np.float64(0.2), 0.1 + 0.2),
    ("numpy_float32", np.float32(0.85), float(np.float32(0.85))),
    ("tiny_float", 1e-07, 1e-07),
    ("huge_float", 1e16, 1e16),
    ("negative_zero", -0.0, -0.0),
    ("integral_float", 24.0, 24.0),
    ("big_int", 10**30, 10**30),
    ("list", [np.int64(16), 19.5, "a, b", None], [16, 19.5, "a, b", None]),
    ("tuple_nested", (1, ("x: y", math.inf)), [1, ["x: y", math.inf]]),
    ("mapping", {"on": 1, "a b": "c"}, {"on": 1, "a b": "c"}),
    ("long_string", LONG, LONG),
]


def _same(got, want) -> bool:
    if isinstance(want, float):
        if math.isnan(want):
            return isinstance(got, float) and math.isnan(got)
        return (
            type(got) is float and got == want and math.copysign(1, got) == math.copysign(1, want)
        )
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and got.keys() == want.keys()
            and all(_same(got[k], want[k]) for k in want)
        )
    return type(got) is type(want) and got == want


@pytest.mark.parametrize(
    ("name", "written", "expected"), ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL]
)
def test_each_value_reads_back_equal(name, written, expected):
    text = yaml_text.value(written)
    assert "\n" not in text  # one line: a value never spills into the next key
    got = yaml.safe_load(f"k: {text}  # a comment after it\n")["k"]
    assert _same(got, expected), (text, got)


def test_the_whole_file_round_trips_with_every_reason_as_a_comment():
    reasons = {name: f"reason for {name}: 'q' \"dq\" # hash\nline two\u2028after LS {i}"
               for i, (name, _, _) in enumerate(ADVERSARIAL)}  # fmt: skip
    items = [Recommendation(f"server.{name}", written, reasons[name])
             for name, written, _ in ADVERSARIAL[: len(ADVERSARIAL) // 2]]  # fmt: skip
    items += [Recommendation(f"vllm.{name}", written, reasons[name])
              for name, written, _ in ADVERSARIAL[len(ADVERSARIAL) // 2 :]]  # fmt: skip
    items.append(Recommendation("odd key: #1", "v", "a key that needs quotes"))
    flags = ('--served-model-name "a\nb"', "--max-num-seqs 8")
    text = to_yaml(Recommendations(items=tuple(items), server_flags=flags))
    data = yaml.safe_load(text)
    assert set(data) == {"server", "vllm"}
    for name, _, expected in ADVERSARIAL:
        section = "server" if any(i.key == f"server.{name}" for i in items) else "vllm"
        assert _same(data[section][name], expected), name
    assert data["server"]["odd key: #1"] == "v"
    lines = text.splitlines()
    for item in items:  # the reason, words intact, stands in the comment lines right above
        section, _, name = item.key.rpartition(".")
        at = next(i for i, line in enumerate(lines) if line.startswith(f"  {yaml_text.key(name)}:"))
        above = []
        for line in reversed(lines[:at]):
            if not line.startswith("  # "):
                break
            above.insert(0, line[4:])
        assert " ".join(above).split() == yaml_text.comment(item.reason).split(), item.key
    # the flags on one comment line, the newline in a value folded to a space
    label, _, said = lines[-1].partition(": ")
    assert label.startswith("# ") and said == " ".join(flags).replace("\n", " ")


def test_floats_are_written_readably_and_exactly():
    assert [yaml_text.value(v) for v in (0.85, 24.0, 1e-07, 1e16, 8)] == [
        "0.85", "24.0", "1.0e-07", "1.0e+16", "8",
    ]  # fmt: skip


def test_comment_turns_every_line_break_into_a_space():
    text = yaml_text.comment("a\nb\rc\x85d\u2028e\u2029f\x0bg")
    assert text == "a b c d e f g"
    assert yaml.safe_load(f"# {text}\nk: 1\n") == {"k": 1}


def test_plain_keys_stay_bare_and_others_are_quoted():
    assert yaml_text.key("max_num_seqs") == "max_num_seqs"
    assert [yaml_text.key(k) for k in ("on", "No", "a b", "x:y", "", "1st")] == [
        '"on"', '"No"', '"a b"', '"x:y"', '""', '"1st"',
    ]  # fmt: skip
