"""How SDK items are stored: one transcript row per item, nothing else.

Every item is one row of the conversation's transcript, its JSON as the row's content
(read back equal, whatever its type: messages, tool calls and their outputs, reasoning,
handoffs, items of types this version does not know), and a role chosen from it so the
conversation store's own views work: a user message is ``user``, an assistant message
``assistant``, a system or developer message ``system``, a tool call or its output
``tool``, anything else ``other``. Removing exact items (``pop_item``,
``clear_session``) is the store's ``truncate(cut="before")``, so no marker rows are
needed and the last N items are the last N rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentstores import Message, StoredMessage, UsageError
from agentstores.models import Role

SESSION_METADATA = {"openai_agents.session": True}
"""Conversation metadata every session carries (what ``list_sessions`` selects by)."""

_MESSAGE_ROLES: Mapping[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}


def role_of(item: Mapping[str, Any]) -> Role:
    """The conversation role an item is stored under."""
    kind = item.get("type")
    role = item.get("role")
    if (kind is None or kind == "message") and isinstance(role, str):
        return _MESSAGE_ROLES.get(role, "other")
    if isinstance(kind, str) and (kind.endswith("_call") or kind.endswith("_call_output")):
        return "tool"
    return "other"


def encode(items: Sequence[Any]) -> list[Message]:
    """The rows of one ``add_items`` call, one per item."""
    rows = []
    for item in items:
        if not isinstance(item, Mapping):
            raise UsageError(f"a session item is a mapping, got {type(item).__name__}")
        rows.append(Message(id=uuid.uuid4().hex, role=role_of(item), content=dict(item)))
    return rows


def items_of(rows: Iterable[StoredMessage]) -> list[Any]:
    """The items held by ``rows``, in order."""
    return [row.content for row in rows]


__all__ = ["SESSION_METADATA", "encode", "items_of", "role_of"]
