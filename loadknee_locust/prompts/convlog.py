"""Recorded conversations in a prompt log, replayed turn by turn in order, gaps kept or scaled.

``--llm-replay-conversations`` reads the JSONL prompt log's records that carry a
``conversation_id`` (any JSON string or number) and groups them: a conversation's turns are its
records in ``turn`` order when they give one, else in file order. Each record is the body that
was sent for that turn, so it already holds the history (an OpenAI chat client resends it); it
is replayed as recorded (lengths-only records are synthesised, as in plain replay). The pause:
with ``timestamp`` (unix seconds) on the records, each turn starts ``(its timestamp − the first
turn's) × --llm-gap-scale`` after the conversation started (at once when the previous answer
came later); without, ``--llm-think-time`` after the previous answer.

Conversations are drawn without replacement with the run's seed (reshuffled when all were
used). The whole log is scanned once at start (offsets and the three fields are kept, not the
text); records without a conversation id, or that do not parse, are counted, never quoted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import IO, Any

from loadknee_core.logentry import LogEntry, LogFormat, entry_from_mapping
from loadknee_locust.prompts.replay import Sampler


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    offset: int  # of its line in the log
    order: float  # its turn number, or its position in the file
    timestamp: float | None


class ConversationLog:
    """The log's conversations; :meth:`next_conversation` gives one's turns and start offsets."""

    def __init__(
        self, path: str | os.PathLike[str], *, seed: int = 0, fmt: LogFormat = "auto"
    ) -> None:
        self.path = os.fspath(path)
        self.fmt = fmt
        self.without_id = 0
        self.bad = 0
        groups: dict[str, list[RecordedTurn]] = {}
        with open(self.path, "rb") as f:
            offset = 0
            for position, raw in enumerate(f):
                line_offset, offset = offset, offset + len(raw)
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                    entry_from_mapping(obj, fmt)
                except ValueError:
                    self.bad += 1
                    continue
                cid = obj.get("conversation_id") if isinstance(obj, dict) else None
                if cid is None or isinstance(cid, bool | dict | list):
                    self.without_id += 1
                    continue
                turn, stamp = obj.get("turn"), obj.get("timestamp")
                order = float(turn) if isinstance(turn, int | float) else float(position)
                ts = float(stamp) if isinstance(stamp, int | float) else None
                groups.setdefault(str(cid), []).append(RecordedTurn(line_offset, order, ts))
        if not groups:
            raise ValueError(
                "--llm-replay-conversations: no record of the prompt log has a conversation_id"
            )
        self.conversations = [sorted(turns, key=lambda t: t.order) for turns in groups.values()]
        self.sampler = Sampler(len(self.conversations), seed=seed, replacement=False)
        self._file: IO[bytes] | None = None

    def next_conversation(self) -> list[tuple[LogEntry, float | None]]:
        """The next conversation: each turn's record and its start, in seconds after the first
        turn's (None without timestamps)."""
        turns = self.conversations[self.sampler.next_index()]
        if self._file is None:
            self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        out: list[tuple[LogEntry, float | None]] = []
        first = turns[0].timestamp
        for turn in turns:
            self._file.seek(turn.offset)
            entry = entry_from_mapping(json.loads(self._file.readline()), self.fmt)
            at = None if first is None or turn.timestamp is None else turn.timestamp - first
            out.append((entry, at))
        return out

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def info(self) -> dict[str, Any]:
        turns = [len(c) for c in self.conversations]
        return {
            "conversations": len(turns),
            "turns": sum(turns),
            "most_turns": max(turns),
            "records_without_conversation_id": self.without_id,
            "bad_records": self.bad,
        }
