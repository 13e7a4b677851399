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
import uuid
from typing import Any, ClassVar

import gevent

from loadknee_locust.client.users import LLMUser
from loadknee_locust.contract import NOT_ERROR_OUTCOMES
from loadknee_locust.plugin.options import llm_options
from loadknee_locust.prompts import Prompt
from loadknee_locust.prompts.conversation import Conversation, ThinkTime

__all__ = ["ConversationUser"]


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
            for turn in range(self.conversation_turns):
                if turn:
                    gevent.sleep(self.think.draw(self._rng))
                self._turn_prompt = conversation.next_prompt()
                row = self.send_request()
                if row.get("outcome") not in NOT_ERROR_OUTCOMES:
                    break  # an unanswered turn ends the conversation
                conversation.answered(int(row.get("completion_tokens") or 0))
        finally:
            self._conversation = None
            self._turn_prompt = None


# Locust keeps a base class's tasks in every subclass: replace LLMUser's one task by the
# conversation (its subclasses inherit this list)
ConversationUser.tasks = [ConversationUser.converse]
