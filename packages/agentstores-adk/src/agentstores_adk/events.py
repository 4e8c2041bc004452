"""ADK events as transcript messages: one message per event, the event whole in it.

A message's id is the event's id (so a retried append is a no-op), its content the
event's JSON (``Event.model_dump_json``: every field, bytes in base64, the timestamp
as the float it was), read back by ``Event.model_validate`` of the JSON object as the
store returns it (which decodes the base64 as the JSON validation would, without writing
the object back to text first): the event that comes back equals the one appended.
Its role says who spoke, for the conversation store's speaker views
(``get_transcript(speaker="user")``, ``recent``): ``user`` for what the user said,
``assistant`` for what a model said (text or function calls), ``tool`` for function
responses, ``other`` for events without content (state changes, transfers).
"""

from __future__ import annotations

from typing import Any

from google.adk.events.event import Event

from agentstores import Message, UsageError
from agentstores.models import Role, StoredMessage, TranscriptMessage

HEADER_ID = "adk-session"
"""The id of every session's first message, written by ``create_session``: it makes the
creation conditional (a second create of the id finds it and is refused) and gives an
empty session a tail to check. Events start at position 1."""


def role_of(event: Event) -> Role:
    """The transcript role of ``event``."""
    content = event.content
    parts = content.parts if content is not None else None
    if not parts:
        return "other"
    if any(part.function_response is not None for part in parts):
        return "tool"
    return "user" if event.author == "user" else "assistant"


def to_message(event: Event) -> Message:
    """The message that stores ``event``."""
    if event.id == HEADER_ID:
        raise UsageError(f"the event id {HEADER_ID!r} is reserved for the session's header")
    # ADK's own DatabaseSessionService stores this form: every field set to a value (a
    # field left out reads back as its default, None), a quarter of the full dump's bytes.
    content: Any = event.model_dump(mode="json", exclude_none=True)
    return Message(
        id=event.id, role=role_of(event), content=content, metadata={"author": event.author}
    )


def from_message(message: StoredMessage | TranscriptMessage) -> Event:
    """The event ``message`` stores (a row of ``read_messages`` or ``get_transcript``)."""
    return Event.model_validate(message.content)


def header(app_name: str, user_id: str, session_id: str) -> Message:
    """The first message of a session."""
    return Message(
        id=HEADER_ID,
        role="other",
        content={"adk": "session", "app_name": app_name, "user_id": user_id, "id": session_id},
    )


__all__ = ["HEADER_ID", "from_message", "header", "role_of", "to_message"]
