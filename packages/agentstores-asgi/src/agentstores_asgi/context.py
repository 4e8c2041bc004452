"""What the application supplies (who is asking, how an answer is produced) and what
the producer is given."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request

from agentstores import Conversation
from agentstores.keys import validate_id, validate_principal
from agentstores.models import Message
from agentstores.protocol import Turn


@dataclass(frozen=True, slots=True)
class Identity:
    """The acting principal and its tenant, as the application's auth established them."""

    tenant: str
    principal: str

    def __post_init__(self) -> None:
        validate_id(self.tenant, "tenant")
        validate_principal(self.principal)


@dataclass(frozen=True, slots=True)
class ProduceContext:
    """One producer run: a new turn, or a takeover resuming a dead one.

    ``text`` is the answer already recorded (empty for a new turn): a producer resuming a
    taken-over turn continues after it. ``turn`` is the running turn (``turn.checkpoint``
    saves what a takeover resumes from, ``turn.lost`` is set when the lease is lost).
    """

    conversation: Conversation
    user_message: Message | None
    text: str
    turn: Turn

    @property
    def message_id(self) -> str:
        """The answer's message id."""
        return self.turn.message_id

    @property
    def resuming(self) -> bool:
        """True when this run takes over a turn another producer began."""
        return self.turn.reason in ("dead", "resume")


IdentityResolver = Callable[[Request], Awaitable[Identity | None]]
"""The application's auth: the request's identity, or None (401)."""
Producer = Callable[[ProduceContext], AsyncIterator[str]]
"""The application's answer: text deltas, run inside ``conv.turn()``."""

__all__ = ["Identity", "IdentityResolver", "ProduceContext", "Producer"]
