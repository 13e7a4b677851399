"""Check that every import path a locustfile may use resolves to the one real object.

Run in a child process: importing the user classes imports locust, which patches the
interpreter with gevent. Prints ``ok`` or raises.
"""

from __future__ import annotations

import sys

import loadknee_locust

assert "locust" not in sys.modules, "importing loadknee_locust alone must not import locust"

from loadknee_locust import (  # noqa: E402
    BatchCompletionsUser,
    ChatUser,
    CompletionsUser,
    KneeShape,
    LLMUser,
    SteppedShape,
    install,
    register,
)
from loadknee_locust.client import conversation, users  # noqa: E402
from loadknee_locust.plugin import install as plugin_install  # noqa: E402
from loadknee_locust.plugin import shape, wiring  # noqa: E402
from loadknee_locust.shape import KneeShape as OldKneeShape  # noqa: E402
from loadknee_locust.shape import SteppedShape as OldSteppedShape  # noqa: E402
from loadknee_locust.users import BatchCompletionsUser as OldBatch  # noqa: E402
from loadknee_locust.users import ChatUser as OldChat  # noqa: E402
from loadknee_locust.users import CompletionsUser as OldCompletions  # noqa: E402
from loadknee_locust.users import LLMUser as OldLLM  # noqa: E402

pairs = [
    (ChatUser, users.ChatUser, OldChat),
    (CompletionsUser, users.CompletionsUser, OldCompletions),
    (BatchCompletionsUser, users.BatchCompletionsUser, OldBatch),
    (LLMUser, users.LLMUser, OldLLM),
    (
        loadknee_locust.ConversationUser,
        conversation.ConversationUser,
        conversation.ConversationUser,
    ),
    (KneeShape, shape.KneeShape, OldKneeShape),
    (SteppedShape, shape.SteppedShape, OldSteppedShape),
    (install, wiring.install, plugin_install),
    (register, wiring.register, wiring.register),
]
for new, real, old in pairs:
    assert new is real is old, (new, real, old)
PUBLIC = {"BatchCompletionsUser", "ChatUser", "CompletionsUser", "KneeShape", "LLMUser"}
PUBLIC |= {"SteppedShape", "install", "register", "ConversationUser"}
assert set(loadknee_locust.__all__) == PUBLIC, loadknee_locust.__all__
print("ok")
