"""How SDK items are stored: one transcript row per item, plus two kinds of marker row.

Every item is one row of the conversation's transcript, its JSON as the row's content
(read back equal, whatever its type: messages, tool calls and their outputs, reasoning,
handoffs, items of types this version does not know), and a role chosen from it so the
conversation store's own views work: a user message is ``user``, an assistant message
``assistant``, a system or developer message ``system``, a tool call or its output
``tool``, anything else ``other``.

The store shortens a transcript only by ``truncate``, which at a ``user`` row removes it
and everything after, and at any other row keeps it and removes everything after. To
remove exactly the last item, or every item, the row just before must be a non-user
row, so the session keeps two kinds of marker row (``metadata["openai_agents"]``):

- ``head``: the session's first row, written with its first items; clearing truncates
  at it (everything after goes, the marker stays: the session stays usable).
- ``gap``: written right after every ``user`` row in the same append; popping the item
  after a user message truncates at the gap.

Markers have role ``other``, content ``null`` and no user data; the speaker views
(``user``, ``assistant``), ``recent`` and ``rehydrate`` never show them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentstores import Message, StoredMessage, UsageError
from agentstores.models import Role

MARKER = "openai_agents"
"""The row metadata key naming a marker row's kind."""
HEAD, GAP = "head", "gap"
HEAD_ID = "openai-agents-head"
"""The head row's id: fixed, so appending it again is a no-op."""
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


def marker(kind: str) -> Message:
    """A marker row (see the module docstring)."""
    return Message(
        id=HEAD_ID if kind == HEAD else f"gap-{uuid.uuid4().hex}",
        role="other",
        content=None,
        metadata={MARKER: kind},
    )


def encode(items: Sequence[Any], *, head: bool) -> list[Message]:
    """The rows of one ``add_items`` call: the head first when asked, then each item,
    each user item followed by a gap."""
    rows = [marker(HEAD)] if head else []
    for item in items:
        if not isinstance(item, Mapping):
            raise UsageError(f"a session item is a mapping, got {type(item).__name__}")
        role = role_of(item)
        rows.append(Message(id=uuid.uuid4().hex, role=role, content=dict(item)))
        if role == "user":
            rows.append(marker(GAP))
    return rows


def kind_of(row: StoredMessage) -> str | None:
    """``head`` or ``gap`` for a marker row, None for an item row."""
    kind = row.metadata.get(MARKER)
    return kind if isinstance(kind, str) else None


def items_of(rows: Iterable[StoredMessage]) -> list[Any]:
    """The items held by ``rows``, in order (markers left out)."""
    return [row.content for row in rows if kind_of(row) is None]


__all__ = [
    "GAP",
    "HEAD",
    "HEAD_ID",
    "MARKER",
    "SESSION_METADATA",
    "encode",
    "items_of",
    "kind_of",
    "marker",
    "role_of",
]
