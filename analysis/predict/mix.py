"""A prompt log's length mix, for ``loadknee predict --prompt-log LOG``.

The log is read as ``loadknee run --llm-prompt-log`` replays it: the same indexer and record
parser (:mod:`loadknee_core.logindex`, :mod:`~loadknee_core.logentry`: plain
Python, no locust, so ``analysis`` may use them), the same accepted shapes (OpenAI bodies, text,
lengths-only records and the public traces' length fields). Per record:

* **prompt tokens**: a lengths record's ``input_tokens``; a text or chat record has no count, so
  its characters (message contents joined) over :data:`CHARS_PER_TOKEN`, said as an estimate;
* **completion tokens**: the observed ``output_tokens``; else the ``max_tokens`` cap (an upper
  bound: the reply may stop earlier); else the source run's own mean completion.

At most :data:`MAX_SAMPLED` records, evenly spaced over the log, are read back.

**The model's workload** (:func:`mix_workload`): the batching model
(:mod:`analysis.predict.batching`) runs one steady state, so the mix enters as its mean
per-request work: the mean prompt and the mean completion (a step admits ``b / E[O]``
sequences, each prefilling ``E[I]`` tokens on average; each request runs ``O`` steps, so the
mean e2e is ``E[O]`` steps — and a tail ratio is a ratio of step times, the same for every
length), and for the KV budget the context a running sequence reserves averaged over the time
each spends in the batch (its completion): ``E[(I + O) × O] / E[O]`` — the long answers are the
ones the batch holds most of the time, so a mix holds fewer sequences than its mean lengths
would. It also keeps an even sample of the records themselves (:data:`PEAK_LENGTHS`): the KV
gauge's peak over a stage swings with which requests run together, which the means cannot say
(:mod:`analysis.predict.kv_peak`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis.predict.facts import LengthMix, OutputSource, Workload
from loadknee_core.logentry import LogEntry
from loadknee_core.logindex import index_log, read_entry

#: the characters one prompt token is assumed to stand for where a record has text, not counts
#: (English text under the common BPE tokenizers: about 4)
CHARS_PER_TOKEN = 4.0
#: the most records read back from the log
MAX_SAMPLED = 10_000
#: the most records the workload keeps for the KV gauge's stage peak (evenly spaced)
PEAK_LENGTHS = 512


def _chars(entry: LogEntry) -> int:
    if entry.text is not None:
        return len(entry.text)
    total = 0
    for message in entry.messages or ():
        content: Any = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):  # content parts: count the text ones
            total += sum(len(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return total


def _lengths(entry: LogEntry, run_output: float) -> tuple[float, float, OutputSource, bool]:
    """(prompt tokens, completion tokens, where the completion came from, prompt estimated)."""
    if entry.kind == "lengths" and entry.input_tokens is not None:
        prompt, estimated = float(entry.input_tokens), False
    else:
        prompt, estimated = max(1.0, round(_chars(entry) / CHARS_PER_TOKEN)), True
    if entry.output_tokens is not None and entry.output_tokens >= 1:
        return prompt, float(entry.output_tokens), "observed", estimated
    if entry.max_tokens is not None and entry.max_tokens >= 1:
        return prompt, float(entry.max_tokens), "cap", estimated
    return prompt, run_output, "run_mean", estimated


def mix_workload(inputs: np.ndarray, outputs: np.ndarray) -> Workload:
    """The model's workload for a mix (see the module docstring)."""
    mean_out = float(outputs.mean())
    context = float(((inputs + outputs) * outputs).mean() / mean_out)
    kept = np.unique(np.linspace(0, len(inputs) - 1, min(len(inputs), PEAK_LENGTHS)).round())
    lengths = tuple((float(inputs[i]), float(outputs[i])) for i in kept.astype(int))
    return Workload(float(inputs.mean()), mean_out, context, lengths)


def read_mix(path: str | os.PathLike[str], run_output_tokens: float) -> LengthMix:
    """The length mix of the prompt log at ``path``; raises ``ValueError`` (the indexer's
    reason) where no valid record remains, ``OSError`` where the file cannot be read."""
    index = index_log(path)
    n = index.valid
    picks = np.unique(np.linspace(0, n - 1, min(n, MAX_SAMPLED)).round().astype(int))
    inputs, outputs, sources, estimated = [], [], Counter[OutputSource](), 0
    with open(index.path, "rb") as f:
        for i in picks:
            prompt, completion, source, guessed = _lengths(
                read_entry(f, index, int(i)), run_output_tokens
            )
            inputs.append(prompt)
            outputs.append(completion)
            sources[source] += 1
            estimated += guessed
    ins, outs = np.asarray(inputs, dtype=float), np.asarray(outputs, dtype=float)
    in_p5, in_p95 = (float(v) for v in np.percentile(ins, [5, 95]))
    out_p5, out_p95 = (float(v) for v in np.percentile(outs, [5, 95]))
    return LengthMix(
        log_file=os.path.basename(os.fspath(path)),
        records=n,
        bad=index.bad_count,
        sampled=len(picks),
        input_mean=float(ins.mean()),
        input_p5=in_p5,
        input_p95=in_p95,
        output_mean=float(outs.mean()),
        output_p5=out_p5,
        output_p95=out_p95,
        output_sources=tuple(sorted(sources.items())),
        input_estimated=estimated,
        chars_per_token=CHARS_PER_TOKEN,
        workload=mix_workload(ins, outs),
    )
