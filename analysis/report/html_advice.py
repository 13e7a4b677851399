"""report.html's recommendations: each setting with its reason, the YAML, then the server flags.

Only the flags to set go in the ``vllm serve`` command; a flag to try (the server's own limit,
memory to spare) is a suggestion with its condition, never a command to paste. Under them, what
each flag to set came from and the flags withheld with their reason.
"""

from __future__ import annotations

from analysis.advice.facts import Recommendation, Recommendations
from analysis.advice.recommend import flag_text
from analysis.report.advice_words import flag_words, is_conditional, reason_text, withheld_text
from analysis.report.html_kit import esc, figure, items, table


def _flags(recs: Recommendations) -> list[Recommendation]:
    return [i for i in recs.items if i.key.startswith("vllm.") and i.value is not None]


def _origins(recs: Recommendations) -> str:
    """What each flag to set came from, and the flags withheld with their reason."""
    said = [
        f"<li><code>{esc(flag_text(i))}</code>: {esc(reason_text(i))}</li>"
        for i in _flags(recs)
        if not is_conditional(i)
    ]
    said.append(items(withheld_text(note) for note in recs.withheld))
    return f"<ul>{''.join(said)}</ul>" if any(said) else ""


def advice_html(recs: Recommendations | None, yaml: str, model: str) -> str:
    """The settings, the YAML, the command with the flags to set and the flags to try."""
    if recs is None:
        return "<p>No recommendations.</p>"
    rows = [(esc(i.key), figure(i.value), esc(reason_text(i))) for i in recs.items]
    ready = " \\\n  ".join(flag_text(i) for i in _flags(recs) if not is_conditional(i))
    command = (
        f"<pre>vllm serve {esc(model)} \\\n  {esc(ready)}</pre>"
        if ready
        else "<p>No flag to set from this run.</p>"
    )
    tries = "".join(
        f'<li class="try" data-flag="{esc(flag_text(i))}">{esc(flag_words(i))}</li>'
        for i in _flags(recs)
        if is_conditional(i)
    )
    return (
        table(("setting", "value", "reason"), rows)
        + f"<h3>YAML</h3><pre>{esc(yaml)}</pre>"
        + f"<h3>Server flags (vLLM)</h3>{command}"
        + (f"<h3>To try, then re-run</h3><ul>{tries}</ul>" if tries else "")
        + _origins(recs)
    )
