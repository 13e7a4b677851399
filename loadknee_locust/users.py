"""Old import path of the user classes, kept so locustfiles written before the layout work.

New code imports them from :mod:`loadknee_locust` (or :mod:`loadknee_locust.client.users`).
"""

from __future__ import annotations

from loadknee_locust.client.users import BatchCompletionsUser, ChatUser, CompletionsUser, LLMUser

__all__ = ["BatchCompletionsUser", "ChatUser", "CompletionsUser", "LLMUser"]
