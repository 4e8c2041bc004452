"""ThreadChat: a thread's conversation as a chat UI reads it, without the checkpoints.

A thread's checkpoints are rows of its conversation's log (role ``other``, metadata
``langgraph``), so the conversation store's own reads of every speaker
(``get_transcript(speaker="all")``, ``read_messages``, ``history``) and its
``message_count`` include them. A chat UI on a LangGraph thread reads through this view:
the same rows minus the checkpointer's, indexed and counted as if those were not there.

Costs: ``message_count`` is one call (the conversation keeps the checkpointer's row
count in its metadata, updated in the same append as the rows). The user and assistant
views are the conversation store's own (indexed) reads. The ``all`` view reads the log
in pages and skips the checkpointer's rows, a walk over the thread: what showing a whole
transcript costs anyway, plus the checkpoints in it.
"""

from __future__ import annotations

from datetime import datetime

from agentstores import ConversationKey, StoredMessage, Stores, TranscriptMessage, UsageError
from agentstores.models import Speaker

from .rows import OWN_ROWS, kind_of

PAGE = 500
"""Rows one read of the ``all`` view asks for."""


class ThreadChat:
    """One thread's chat messages as ``principal`` sees them."""

    def __init__(self, stores: Stores, key: ConversationKey, principal: str = "") -> None:
        self.stores = stores
        self.key = key
        self.principal = principal

    async def message_count(self) -> int:
        """The conversation's messages that are not the checkpointer's (0 if absent)."""
        info = await self.stores.conversations.get_conversation(self.key, self.principal)
        if info is None:
            return 0
        own = info.metadata.get(OWN_ROWS, 0)
        return info.message_count - (own if isinstance(own, int) else 0)

    async def messages(self) -> list[StoredMessage]:
        """Every message that is not the checkpointer's, oldest first (``seq`` kept)."""
        found: list[StoredMessage] = []
        start = 0
        while True:
            page = await self.stores.conversations.read_messages(
                self.key, self.principal, start=start, limit=PAGE
            )
            found += [m for m in page if kind_of(m) is None]
            if len(page) < PAGE:
                return found
            start += PAGE

    async def history(self) -> list[StoredMessage]:
        """As the store's ``history``: the latest compaction message and every message
        after it (all if none), without the checkpointer's rows."""
        found = await self.messages()
        marks = [i for i, m in enumerate(found) if m.compaction]
        return found[marks[-1] :] if marks else found

    async def get_transcript(
        self,
        *,
        index: int | None = None,
        time_range: tuple[datetime, datetime] | None = None,
        speaker: Speaker = "all",
        limit: int | None = None,
    ) -> list[TranscriptMessage]:
        """As the conversation store's ``get_transcript``, with the checkpointer's rows
        left out of the ``all`` view (``index`` counts without them)."""
        if speaker != "all":  # checkpointer rows are role "other": never in these views
            return await self.stores.conversations.get_transcript(
                self.key,
                self.principal,
                index=index,
                time_range=time_range,
                speaker=speaker,
                limit=limit,
            )
        if index is not None and time_range is not None:
            raise UsageError("pass index or time_range, not both")
        if limit is not None and limit < 0:
            raise UsageError("limit must be >= 0")
        rows = [
            TranscriptMessage(i, m.role, m.content, m.id, m.created_at)
            for i, m in enumerate(await self.messages())
        ]
        if index is not None:
            position = index if index >= 0 else len(rows) + index
            rows = rows[position : position + 1] if 0 <= position < len(rows) else []
        elif time_range is not None:
            rows = [r for r in rows if time_range[0] <= r.created_at <= time_range[1]]
        return rows if limit is None else rows[:limit]


__all__ = ["ThreadChat"]
