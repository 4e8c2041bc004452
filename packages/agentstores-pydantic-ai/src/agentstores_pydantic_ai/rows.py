"""One transcript row per ``ModelMessage``: its exact ``ModelMessagesTypeAdapter`` JSON.

A row's content is the JSON object the adapter dumps for the message (bytes as base64,
as the adapter writes them), so loading is the adapter's own validation of the same
JSON object (``validate_python`` of the objects as the store returns them, which reads
the base64 as ``validate_json`` of their text would, without writing them back to text
first), and nothing of a message (parts, usage, timestamps, provider details, run ids) is
lost or reshaped. A row's id is a digest of the row before it and its content: the same
message stored after the same tail always gets the same id, so storing a run's messages
again is a no-op, while the same message at another place in the history is another row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SpeechPart,
    SystemPromptPart,
    ToolReturnPart,
    UserPromptPart,
)

from agentstores import Message, StoredMessage
from agentstores.models import Role

MARK = "pydantic_ai"
"""Row metadata key naming the message's kind (``request`` or ``response``): the rows the
history loads (other rows of the conversation, such as a turn's own reply, are skipped)."""
ID_PREFIX = "pai-"


def dump(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """The adapter's JSON of each message, as JSON objects."""
    found: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return found


def load(contents: Sequence[Any]) -> list[ModelMessage]:
    """The messages the adapter validates from the stored JSON objects."""
    return ModelMessagesTypeAdapter.validate_python(list(contents))


def encoded(content: Any) -> bytes:
    """``content`` as the compact JSON its id is a digest of (and its size is read from)."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def row_id(previous: str | None, data: bytes) -> str:
    """The id of the content ``data`` (:func:`encoded`) stored right after the row
    ``previous`` (None: first)."""
    digest = hashlib.sha256((previous or "").encode("utf-8") + b"\x00")
    digest.update(data)
    return ID_PREFIX + digest.hexdigest()


def role_of(message: ModelMessage) -> Role:
    """``assistant`` for a response. For a request: ``user`` when it holds a user prompt
    or the user's speech, ``tool`` when it answers a tool call or asks for a retry,
    ``system`` when it holds only system prompts, else ``other`` (instruction and
    availability deltas, capability parts, an application's compaction summary)."""
    if isinstance(message, ModelResponse):
        return "assistant"
    parts = list(message.parts)
    if any(
        isinstance(p, UserPromptPart) or (isinstance(p, SpeechPart) and p.speaker == "user")
        for p in parts
    ):
        return "user"
    if any(isinstance(p, (ToolReturnPart, RetryFeedbackPart, RetryPromptPart)) for p in parts):
        return "tool"
    if parts and all(isinstance(p, SystemPromptPart) for p in parts):
        return "system"
    return "other"


class Row(NamedTuple):
    """A row to append, and its content's size in bytes."""

    message: Message
    size: int


def to_rows(messages: Sequence[ModelMessage], tail: str | None) -> list[Row]:
    """The rows that store ``messages`` after the row ``tail``, with their chained ids."""
    rows: list[Row] = []
    previous = tail
    for message, content in zip(messages, dump(messages), strict=True):
        metadata: dict[str, Any] = {MARK: message.kind}
        if message.run_id:
            metadata["run_id"] = message.run_id
        data = encoded(content)
        previous = row_id(previous, data)
        rows.append(Row(Message(previous, role_of(message), content, metadata), len(data)))
    return rows


def is_message_row(row: StoredMessage) -> bool:
    """Whether ``row`` holds a ``ModelMessage`` this bridge stored."""
    return row.metadata.get(MARK) in ("request", "response") and isinstance(row.content, dict)


__all__ = [
    "ID_PREFIX",
    "MARK",
    "Row",
    "dump",
    "encoded",
    "is_message_row",
    "load",
    "role_of",
    "row_id",
    "to_rows",
]
