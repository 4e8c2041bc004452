"""The JSON shapes of conversations and messages (and the AI SDK's UIMessage)."""

from __future__ import annotations

from typing import Any

from agentstores.models import ConversationInfo, StoredMessage, TranscriptMessage
from agentstores.protocol import message_text


def info_json(info: ConversationInfo) -> dict[str, Any]:
    """A conversation's metadata (``shared_with`` only for its owner's eyes)."""
    return {
        "id": info.key.session_id,
        "owner": info.owner,
        "title": info.title,
        "created_at": info.created_at.isoformat(),
        "updated_at": info.updated_at.isoformat(),
        "expires_at": info.expires_at.isoformat() if info.expires_at else None,
        "last_turn_status": info.last_turn_status,
        "tail_message_id": info.tail_message_id,
        "message_count": info.message_count,
        "metadata": dict(info.metadata),
    }


def message_json(message: StoredMessage | TranscriptMessage) -> dict[str, Any]:
    """A stored message; ``seq`` (whole transcript) or ``index`` (the speaker's view)."""
    body: dict[str, Any] = {
        "id": message.id,
        "role": message.role,
        "content": message.content,
        "created_at": message.created_at.isoformat(),
    }
    if isinstance(message, StoredMessage):
        body["seq"] = message.seq
        body["metadata"] = dict(message.metadata)
    else:
        body["index"] = message.index
    return body


def ui_message(message: StoredMessage | TranscriptMessage) -> dict[str, Any] | None:
    """The AI SDK UIMessage for a user or assistant message (None for other roles)."""
    if message.role not in ("user", "assistant"):
        return None
    text = message_text(message.content)
    return {"id": message.id, "role": message.role, "parts": [{"type": "text", "text": text}]}


__all__ = ["info_json", "message_json", "ui_message"]
