"""``loadknee predict --slots N --kv-tokens N``: the engine's settings, stated by the user, in
place of what a run without ``/metrics`` could only assume.

The run: ``tests/support/data/imports/loadknee``, a real sweep of the simulator's ``fast`` preset
(8 slots, a 16,384-token KV pool) at 64 + 64 tokens without ``/metrics``. Its rows cannot tell
the 8-slot limit from a KV budget full at 8 sequences, so at twice the prompt the model reads the
budget as binding (5) while the interval reaches the 8 the slots give; a stated pool settles it.
"""

from __future__ import annotations

import json

import pytest

from analysis.pipeline import Analysis, analyze_run
from analysis.predict.cli import PROG, main
from analysis.predict.facts import Workload
from analysis.predict.fit import fit_capacity
from analysis.predict.whatif import predict
from tests.support.paths import REPO

RUN = REPO / "tests" / "support" / "data" / "imports" / "loadknee"
#: twice the run's 64-token prompt
LONGER = Workload(128, 64)


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    return analyze_run(RUN)


#: case → (stated slots, stated KV tokens), (slot source, KV source, what bound the run),
#: (capacity, interval low, high) at 128 + 64 tokens
CASES = {
    "nothing stated: slots or KV, the interval spans both": (
        (None, None), ("client_estimate", "knee_assumed", "slots"), (5, 5, 8)),
    "the simulator's pool: the slots bind": (
        (None, 16384), ("client_estimate", "stated", "slots"), (8, 8, 8)),
    "a pool full at 8 sequences of 64 + 64: KV binds, no slot limit kept": (
        (None, 1024), ("none", "stated", "kv"), (5, 5, 5)),
    "slots alone leave the KV budget assumed": (
        (8, None), ("stated", "knee_assumed", "slots"), (5, 5, 8)),
    "both stated": ((8, 16384), ("stated", "stated", "slots"), (8, 8, 8)),
    "a stated slot limit is kept where KV binds": (
        (8, 1024), ("stated", "stated", "kv"), (5, 5, 5)),
}  # fmt: skip


@pytest.mark.parametrize(("stated", "sources", "predicted"), CASES.values(), ids=CASES)
def test_stated_settings_replace_what_the_run_assumed(
    analysis: Analysis,
    stated: tuple[int | None, int | None],
    sources: tuple[str, str, str],
    predicted: tuple[int, int, int],
) -> None:
    slots, kv_tokens = stated
    fit = fit_capacity(analysis, stated_slots=slots, stated_kv_tokens=kv_tokens)
    assert (fit.slot_source, fit.kv_source, fit.run_bound.bound) == sources
    if slots is not None:
        assert fit.params.slots == slots
    if kv_tokens is not None:
        assert fit.params.kv_tokens is not None and fit.params.kv_tokens.value == kv_tokens
    p = predict(fit, LONGER, analysis.knee_params)
    assert p.refusal is None and p.point is not None
    assert (p.point.users, p.low, p.high) == predicted
    # at the run's own lengths every reading gives the run's own capacity back
    own = predict(fit, fit.workload, analysis.knee_params)
    assert own.point is not None and own.point.users == 8


def test_the_cli_passes_them_on(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(RUN), "--input-tokens", "128", "--format", "json"]
    assert main([*argv, "--kv-tokens", "16384"]) == 0
    doc = json.loads(capsys.readouterr().out)["prediction"]
    assert doc["fit"]["kv_source"] == "stated"
    assert doc["fit"]["params"]["kv_tokens"]["value"] == 16384
    assert doc["point"]["users"] == 8


@pytest.mark.parametrize("flag", ["--slots", "--kv-tokens"])
@pytest.mark.parametrize("value", ["0", "-3", "1.5", "many"])
def test_a_bad_setting_is_one_line_and_exit_2(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        main([str(RUN), flag, value])
    assert raised.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{PROG}:") and "\n" not in err  # one line, the command's name first
