"""A Locust user that holds conversations: N turns, each resending the history, think time between.

Each task iteration is one conversation (:class:`~loadknee_locust.prompts.conversation
.Conversation`): ``turns`` requests (``--llm-turns`` unless the class sets it), the pause
between an answer and the next turn drawn from ``think_time`` (``--llm-think-time``). Every row
carries the conversation's id and the turn (0 first; ``conversation_id``/``turn`` in
``requests.csv``). A turn that fails ends its conversation (the next iteration starts a new
one: a chat whose answer never came does not go on); a user stopped by a stage change or the
end of the run cuts its conversation there, and that turn's row says so (``cancelled``, "user
stopped"). With one turn and no think time a user sends single requests, as :class:`LLMUser`
does, so the default locustfile's user is one of these.

A stage's users are conversations in flight; its think time keeps each from sending, so a
stage of ``u`` users has at most ``u`` requests in flight and fewer while users think.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any, ClassVar

import gevent
from locust.exception import StopUser

from loadknee_core.contract import NOT_ERROR_OUTCOMES
from loadknee_locust.client.users import LLMUser
from loadknee_locust.plugin.options import llm_options
from loadknee_locust.prompts import Prompt
from loadknee_locust.prompts.conversation import Conversation, ThinkTime
from loadknee_locust.prompts.convlog import ConversationLog
from loadknee_locust.prompts.replay import LogReplaySource

__all__ = ["ConversationUser"]


def think_after(row: dict[str, Any], seconds: float) -> None:
    """Pause until ``seconds`` after the answer in ``row`` ended, as a person reads and types.

    Counted from the answer's last byte (``end_unix_s``), not from when this greenlet got back
    to it: recording the row and building the next prompt come out of the think time instead of
    adding to it, so the gap between an answer and the next turn is the think time asked for."""
    ended = row.get("end_unix_s")
    elapsed = time.time() - float(ended) if isinstance(ended, (int, float)) else 0.0
    gevent.sleep(max(0.0, seconds - max(0.0, elapsed)))


class ConversationUser(LLMUser):
    """One conversation per iteration (abstract: subclass it, or use the default locustfile)."""

    abstract = True
    #: turns per conversation and think time; None = ``--llm-turns`` / ``--llm-think-time``
    turns: ClassVar[int | None] = None
    think_time: ClassVar[str | None] = None

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        opts = llm_options(environment)
        self.conversation_turns = self.turns if self.turns is not None else opts.turns
        self.think = ThinkTime.parse(self.think_time if self.think_time is not None
                                     else opts.think_time)  # fmt: skip
        self._rng = random.Random(f"{opts.seed}-{self.user_id}")
        self._conversation: Conversation | None = None
        self._turn_prompt: Prompt | None = None

    def row_context(self) -> dict[str, Any]:
        c = self._conversation
        extra = super().row_context()
        return extra if c is None else {**extra, "conversation_id": c.conversation_id,
                                        "turn": c.turn}  # fmt: skip

    def _prompts(self) -> list[Prompt]:
        if self._turn_prompt is not None:
            return [self._turn_prompt]
        return super()._prompts()

    def converse(self) -> None:
        """One conversation (or, with one turn, one request)."""
        if self.llm.source is None:
            self.generate()  # stops the test with the reason, as a single request would
            return
        if llm_options(self.environment).replay_conversations:
            self._replay_conversation()
            return
        if self.conversation_turns <= 1:
            self.send_request()
            return
        source = self.llm.source
        vocabulary = getattr(getattr(source, "synth", None), "vocabulary", None)
        conversation = Conversation(
            source, self.endpoint, conversation_id=uuid.uuid4().hex[:16],
            **({"vocabulary": vocabulary} if vocabulary is not None else {}),
        )  # fmt: skip
        self._conversation = conversation
        try:
            row: dict[str, Any] = {}
            for turn in range(self.conversation_turns):
                self._turn_prompt = conversation.next_prompt()  # built before the pause
                if turn:
                    think_after(row, self.think.draw(self._rng))
                row = self.send_request()
                if row.get("outcome") not in NOT_ERROR_OUTCOMES:
                    break  # an unanswered turn ends the conversation
                conversation.answered(int(row.get("completion_tokens") or 0))
        finally:
            self._conversation = None
            self._turn_prompt = None

    def _replay_conversation(self) -> None:
        """One recorded conversation of the log, turn by turn (:mod:`~loadknee_locust.prompts
        .convlog`): each turn as recorded, one unique tag for all its turns, the recorded
        start offsets × ``--llm-gap-scale`` (or the think time when the log has none)."""
        source = self.llm.source
        try:
            conversations = recorded_conversations(self.llm)
        except (OSError, ValueError) as exc:  # said once, by stop_test
            self.llm.source_error = str(exc)
            self.llm.stop_test()
            raise StopUser() from None
        if not isinstance(source, LogReplaySource) or conversations is None:
            self.send_request()
            return
        opts = llm_options(self.environment)
        turns = conversations.next_conversation()
        tag = source.synth.text(0) if source.synth.unique_tag else ""
        conversation = Conversation(source, self.endpoint, conversation_id=uuid.uuid4().hex[:16])
        self._conversation = conversation
        start = time.monotonic()
        try:
            for k, (entry, at) in enumerate(turns):
                if k:
                    if at is not None:
                        gevent.sleep(max(0.0, start + at * opts.gap_scale - time.monotonic()))
                    else:
                        gevent.sleep(self.think.draw(self._rng))
                self._turn_prompt = source.prompt_for(entry, self.endpoint, tag=tag)
                row = self.send_request()
                if row.get("outcome") not in NOT_ERROR_OUTCOMES:
                    break
                conversation.turn += 1
        finally:
            self._conversation = None
            self._turn_prompt = None


def recorded_conversations(llm: Any) -> ConversationLog | None:
    """The process's :class:`ConversationLog` of ``--llm-prompt-log`` (built once per log)."""
    opts = llm.options
    if not opts.replay_conversations or not opts.prompt_log:
        return None
    key = (opts.prompt_log, opts.seed)
    held = getattr(llm, "_loadknee_conversation_log", None)
    if held is None or held[0] != key:
        seed = llm.source_options.seed  # each worker its own order
        held = (key, ConversationLog(opts.prompt_log, seed=seed, fmt=opts.log_format))
        llm._loadknee_conversation_log = held
    log: ConversationLog = held[1]
    return log


# Locust keeps a base class's tasks in every subclass: replace LLMUser's one task by the
# conversation (its subclasses inherit this list)
ConversationUser.tasks = [ConversationUser.converse]
