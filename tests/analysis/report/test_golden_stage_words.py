"""Golden output: the words of the stages' findings (:mod:`analysis.report.stage_words`,
:mod:`analysis.report.rate_words`): where a run was cut short, each kind of baseline warning,
and the open-loop rate knee with each of its signs.

The stage tests assert on the findings (:class:`~analysis.stages.run_cut.RunCut`,
:class:`~analysis.model.BaselineNote`); this file pins what each says in
``tests/support/data/golden/stage_words.txt`` (one ``case: words`` line each). When a rewording
is intended, regenerate it with the other golden files and review the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 \\
        tests/analysis/report/test_golden_stage_words.py
"""

from __future__ import annotations

from analysis.model import BaselineNote
from analysis.report.rate_words import rate_knee_text, rate_reasons_text
from analysis.report.stage_words import baseline_note_text, cut_text, provisional_text
from analysis.stages.rate_stages import RateKnee, RateSignal
from analysis.stages.run_cut import RunCut
from tests.support.golden import check_golden

#: case → where a run was cut
CUTS = {
    "interrupted, levels left": RunCut("interrupted", 3, 8, 12.4, (16, 32)),
    "stopped, users unknown": RunCut("stopped", 2, None, None, ()),
    "killed before any stage": RunCut("killed", None, None, None, (1,)),
    "interrupted, nothing measured": RunCut("interrupted", 1, 1, 0.0, ()),
}
#: case → a baseline warning
NOTES = {
    "no baseline": BaselineNote("no_baseline"),
    "a step stage stands in": BaselineNote("first_stage", users=4),
    "few requests": BaselineNote("few_requests", requests=5, min_requests=20),
    "e2e spread": BaselineNote("spread", figure="e2e_ms", p50=1234.5, p95=98765.4, limit_ratio=1.5),
    "per-1k spread": BaselineNote("spread", figure="s_per_1k", p50=1.0, p95=3.27, limit_ratio=1.5),
}

_SIGNS = (
    RateSignal("not_following", served_pct=68.6, threshold=90.0),
    RateSignal("backlog_grew", backlog_first=11.24, backlog_last=39.71),
    RateSignal("tail_departed", tail_ratio=8.64, threshold=2.0),
)
#: case → the rate knee
RATE_KNEES = {
    "a knee": RateKnee(3, 16.0, 8.0, None, _SIGNS),
    "a knee, the most within the SLOs": RateKnee(3, 16.0, 8.0, 4.0, _SIGNS, slo_judged=True),
    "a knee, none within the SLOs": RateKnee(3, 16.0, 8.0, None, _SIGNS, slo_judged=True),
    "a knee at the lowest rate": RateKnee(0, 2.5, None, None, _SIGNS[2:]),
    "no knee": RateKnee(None, None, 2.5, 2.5, (), slo_judged=True),
    "no rate stage": RateKnee(None, None, None, None, ()),
}


def _text() -> str:
    lines = [f"cut, {case}: {cut_text(cut)}" for case, cut in CUTS.items()]
    lines.append(f"provisional, read back: {provisional_text('(words from knee.json)')}")
    lines += [f"baseline, {case}: {baseline_note_text(note)}" for case, note in NOTES.items()]
    lines.append(f"baseline, read back: {baseline_note_text('(words from knee.json)')}")
    lines.append(f"rate signs, all three: {rate_reasons_text(_SIGNS)}")
    lines += [f"rate knee, {case}: {rate_knee_text(knee)}" for case, knee in RATE_KNEES.items()]
    return "\n".join(lines) + "\n"


def test_every_stage_finding_has_its_golden_words() -> None:
    text = _text()
    check_golden("stage_words.txt", text)
