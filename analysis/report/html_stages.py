"""report.html's reasons per stage: the knee's summary, each stage's verdict with its reasons and
its signals folded (fired or quiet, the value against its threshold, in words), then the likely
bottleneck of every stage."""

from __future__ import annotations

from analysis.model import KneeResult, StageVerdict
from analysis.report.colours import VERDICT_COLOURS
from analysis.report.diagnosis_words import bottleneck_text
from analysis.report.html_kit import esc, items, table
from analysis.report.knee_summary import summary_words
from analysis.report.knee_words import signal_text
from analysis.report.stage_reasons import reasons_text
from loadknee_core.numeric import counted, fmt_magnitude

FIRED = '<span class="fired">yes</span>'
QUIET = '<span class="quiet">no</span>'


def _stage(sv: StageVerdict) -> str:
    colour = VERDICT_COLOURS.get(sv.verdict, "#424242")
    trust = "" if sv.trusted else " — <b>untrusted: client-bound</b>"
    reasons = items(reasons_text(sv)) or "<li>no rule fired</li>"
    signals = table(
        ("signal", "fired", "value", "threshold", "in words"),
        (
            (esc(s.name), FIRED if s.fired else QUIET, fmt_magnitude(s.value),
             fmt_magnitude(s.threshold), esc(signal_text(s)))
            for s in sv.signals
        ),
        numeric=(2, 3),
    )  # fmt: skip
    return (
        f'<h3>{counted(sv.target_users, "user")} — <span style="color:{colour}">'
        f"{esc(sv.verdict.replace('_', ' '))}</span>{trust}</h3><ul>{reasons}</ul>"
        f"<details><summary>signals</summary>{signals}</details>"
    )


def _diagnosis(knee: KneeResult) -> str:
    rows = [
        (str(sv.target_users), esc(sv.bottleneck),
         esc(bottleneck_text(sv.bottleneck_reason) or "none"))
        for sv in knee.stages
    ]  # fmt: skip
    return table(("users", "likely bottleneck", "why"), rows, numeric=(0,))


def stages_html(knee: KneeResult | None) -> str:
    """The section's body: the summary, every stage's reasons and signals, the diagnosis."""
    if knee is None:
        return "<p>No verdicts.</p>"
    stages = "".join(_stage(sv) for sv in knee.stages)
    return f"<p>{esc(summary_words(knee))}</p>{stages}<h3>Diagnosis</h3>{_diagnosis(knee)}"
