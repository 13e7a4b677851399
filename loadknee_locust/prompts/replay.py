"""The log-replay prompt source: seeded sampling of records from an indexed prompt log.

Sampling is with replacement (``random.randrange``) or without (a seeded shuffle of the record
numbers, reshuffled when exhausted; ``epochs`` counts the passes). Lengths-only records are
synthesised (see ``prompts.synth``) with a pinned output; records with text keep their text and
their ``max_tokens`` cap (pinned only when the log gives the observed ``output_tokens``).
``output_scale`` multiplies every replayed output length. With a unique tag (the default) the
tag goes in front of the prompt text, or of the first message with string content.
"""

from __future__ import annotations

import logging
import os
import random
from array import array
from collections.abc import Mapping
from typing import IO, Any

from loadknee_core.logentry import LogEntry, LogFormat
from loadknee_core.logindex import LogIndex, index_log, read_entry
from loadknee_locust.prompts.model import Endpoint, Prompt
from loadknee_locust.prompts.synth import PromptSynth

log = logging.getLogger(__name__)


class Sampler:
    """Seeded record numbers in ``range(n)``, with or without replacement."""

    def __init__(self, n: int, *, seed: int, replacement: bool) -> None:
        self.n = n
        self.replacement = replacement
        self.epochs = 0
        self._rng = random.Random(seed)
        self._order: array[int] = array("q")
        self._pos = 0

    def next_index(self) -> int:
        if self.replacement:
            return self._rng.randrange(self.n)
        if self._pos >= len(self._order):
            self._order = array("q", range(self.n))
            self._rng.shuffle(self._order)
            self._pos = 0
            self.epochs += 1
        i = self._order[self._pos]
        self._pos += 1
        return i


class LogReplaySource:
    """Replays a prompt log; the file stays on disk and is read one record at a time."""

    kind = "log_replay"

    def __init__(
        self,
        path: str | os.PathLike[str],
        synth: PromptSynth,
        *,
        fmt: LogFormat = "auto",
        seed: int = 0,
        replacement: bool = True,
        output_scale: float = 1.0,
        default_output_tokens: int = 64,
    ) -> None:
        if output_scale <= 0:
            raise ValueError("--llm-output-scale must be > 0")
        self.synth = synth
        self.fmt = fmt
        self.output_scale = output_scale
        self.default_output_tokens = default_output_tokens
        self.index: LogIndex = index_log(path, fmt)
        if self.index.bad_count:
            log.warning("prompt log %s", self.index.summary())
        self.sampler = Sampler(self.index.valid, seed=seed, replacement=replacement)
        self.calibration_targets: tuple[int, ...] = ()
        self.seed = seed
        self._file: IO[bytes] | None = open(self.index.path, "rb")  # noqa: SIM115 - see close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _scaled(self, n: int) -> int:
        return max(1, round(n * self.output_scale))

    def next_prompt(self, endpoint: Endpoint) -> Prompt:
        if self._file is None:
            self._file = open(self.index.path, "rb")  # noqa: SIM115 - see close()
        entry = read_entry(self._file, self.index, self.sampler.next_index(), self.fmt)
        return self.prompt_for(entry, endpoint)

    def prompt_for(self, entry: LogEntry, endpoint: Endpoint, *, tag: str | None = None) -> Prompt:
        """The prompt to send for one record (``tag``: this unique tag, e.g. one conversation's
        for all its turns; None: a new one)."""
        if entry.kind == "lengths":
            assert entry.input_tokens is not None and entry.output_tokens is not None
            return self.synth.build(endpoint, entry.input_tokens, self._scaled(entry.output_tokens))
        if entry.output_tokens is not None:
            max_tokens, pin = self._scaled(entry.output_tokens), True
        elif entry.max_tokens is not None:
            max_tokens, pin = self._scaled(entry.max_tokens), False
        else:
            max_tokens, pin = self._scaled(self.default_output_tokens), False
        if tag is None:
            tag = self.synth.text(0) if self.synth.unique_tag else ""
        prefix = self.synth.prefix
        if entry.kind == "messages":
            messages = _tagged(entry.messages or (), tag)
            return Prompt.hashed(prefix, None, messages, max_tokens, pin=pin)
        text = f"{tag}\n{entry.text}" if tag else entry.text
        return Prompt.hashed(prefix, text, None, max_tokens, pin=pin)

    def info(self) -> dict[str, Any]:
        idx = self.index
        return {
            "kind": self.kind,
            "log_path": idx.path,
            "log_sha256": idx.sha256,
            "log_format": self.fmt,
            "records": idx.records,
            "valid_records": idx.valid,
            "record_kinds": dict(idx.kinds),
            "bad_records": idx.bad_count,
            "bad_lines": [{"line": n, "reason": r} for n, r in idx.bad_samples],
            "sampling": "with_replacement" if self.sampler.replacement else "without_replacement",
            "seed": self.seed,
            "epochs": self.sampler.epochs,
            "output_scale": self.output_scale,
            "shared_prefix_tokens": self.synth.prefix_tokens,
            "unique_tag": self.synth.unique_tag,
            "calibration": self.synth.calibrations(),
            "vocabulary": self.synth.vocabulary.as_dict(),
        }


def _tagged(messages: tuple[Mapping[str, Any], ...], tag: str) -> tuple[Mapping[str, Any], ...]:
    if not tag:
        return messages
    out = list(messages)
    for i, m in enumerate(out):
        if isinstance(m.get("content"), str):
            out[i] = {**m, "content": f"{tag}\n{m['content']}"}
            break
    return tuple(out)
