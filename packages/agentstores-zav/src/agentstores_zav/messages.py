"""The SDK's ChatMessage as an agentstores message, losing nothing.

The transcript row keeps ``content`` as the message's text (what listings, search and
rehydration read) and its role from the sender (user -> ``user``, bot -> ``assistant``).
Every other field the SDK message set (``message_id``, ``session_id``, ``content_parts``,
``image_uri``, ``function_call_request``, ``function_call_response``, ``evidences``,
``function_specs``, ``reasoning_summary``, and the sender itself) goes, as the SDK's
own JSON form, into the message metadata under :data:`FIELDS`. Only fields that were
set are kept, so the decoded message equals the original, fields-set included.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from zav.agents_sdk.domain.chat_message import ChatMessage, ChatMessageSender

from agentstores import Message, StoredMessage

FIELDS = "zav_message"
"""The metadata entry holding every ChatMessage field except ``content``."""


def message_to_json(message: ChatMessage) -> dict[str, Any]:
    """The whole message as JSON (what the recording stores)."""
    data: dict[str, Any] = message.model_dump(mode="json", exclude_unset=True)
    return data


def message_from_json(data: Any) -> ChatMessage:
    """Inverse of :func:`message_to_json`."""
    return ChatMessage.model_validate(data)


def role_of(message: ChatMessage) -> str:
    """``user`` for the user, ``assistant`` for the bot."""
    return "user" if ChatMessageSender(message.sender) is ChatMessageSender.USER else "assistant"


def to_message(message: ChatMessage, message_id: str) -> Message:
    """``message`` as the transcript row ``message_id``."""
    fields = message_to_json(message)
    content = fields.pop("content")
    return Message(message_id, role_of(message), content, {FIELDS: fields})  # type: ignore[arg-type]


def from_stored(stored: StoredMessage) -> ChatMessage:
    """A transcript row as the SDK's ChatMessage (rows written by other code included)."""
    fields = stored.metadata.get(FIELDS) if isinstance(stored.metadata, Mapping) else None
    if isinstance(fields, Mapping):
        return ChatMessage.model_validate({**fields, "content": stored.content})
    sender = ChatMessageSender.USER if stored.role == "user" else ChatMessageSender.BOT
    content = stored.content if isinstance(stored.content, str) else json.dumps(stored.content)
    return ChatMessage(sender=sender, content=content)


def stable_id(message: ChatMessage, anchor: str, position: int) -> str:
    """The row id of a message without a ``message_id`` of its own (a user message
    the client did not name).

    It hashes ``anchor`` (the producing turn's message id; outside a turn, the
    transcript's tail), the message's position in its batch and the whole message, so
    publishing one turn's batch again inside that turn is a no-op while the same words
    in a later turn, or twice in one batch, are new messages.
    """
    body = json.dumps(message_to_json(message), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(f"{anchor}\x00{position}\x00{body}".encode()).hexdigest()
    return f"{role_of(message)}-{digest[:32]}"


def own_id(role: str, message_id: str, occurrence: int = 0) -> str:
    """The row id of a ``role`` message that carries its own ``message_id``.

    The SDK stamps every bot message with its turn's id, so a turn's answer has one row
    however often the turn is driven; a client that names its user messages makes a
    resent request's user turn a no-op. ``occurrence`` tells apart messages of one batch
    that carry the same id. The id is hashed (with the role) so any string the SDK
    accepts is a valid row id.
    """
    seed = f"{role}\x00{message_id}\x00{occurrence}"
    return f"{role}-{hashlib.sha256(seed.encode()).hexdigest()[:32]}"


__all__ = [
    "FIELDS",
    "from_stored",
    "message_from_json",
    "message_to_json",
    "own_id",
    "role_of",
    "stable_id",
    "to_message",
]
