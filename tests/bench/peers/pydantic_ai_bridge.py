"""agentstores-pydantic-ai on PostgreSQL or Redis, timed as the bench times every system.

Pydantic AI has no durable store of its own (``InMemoryConversationStore`` keeps a
history in one process), so there is no peer to measure; this measures what the bridge
adds over agentstores' own calls (:class:`~.systems.AgentStores` on the same server):
the adapter's serialization, the chained row ids, the tail condition, and the
validation on the way back.

- ``append``: one ``ModelMessage`` stored after the history the process holds (the
  conditional append a run's store makes).
- ``first_user``: the first user row (the store's speaker index), validated back into a
  ``ModelRequest``.
- ``recent``: ``load(session, limit=k)``, the last ``k`` messages as ``ModelMessage``.
- ``list_sessions``: every session of the listing user, all pages of the store's listing
  (the bridge keeps no listing of its own: a session is a conversation).

``framework_cost`` times Pydantic AI's own work alone for the first three (no store
call): the message an append stores built and dumped by ``ModelMessagesTypeAdapter``,
the first user row and the last 20 rows (read beforehand, untimed) validated by it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

from .systems import LISTER, Listing, System, role_of, text_of

LIST_PAGE = 1000


@dataclass
class Session:
    """A conversation handle: the session id and the history the process holds for it."""

    id: str
    history: Any


def _message(n: int) -> Any:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    at = datetime(2026, 1, 1, tzinfo=UTC)
    if role_of(n) == "user":
        return ModelRequest([UserPromptPart(text_of(n), timestamp=at)], timestamp=at)
    return ModelResponse([TextPart(text_of(n))], model_name="bench", timestamp=at)


class PydanticAIBridge(System, Listing):
    """:class:`agentstores_pydantic_ai.AgentStoresHistory` over agentstores-postgres or
    agentstores-redis at ``url``; ``measure`` gives the server's storage bytes."""

    def __init__(self, name: str, server: str, url: str, measure: Any) -> None:
        self.name, self.server, self.url = name, server, url
        self._measure = measure
        self.principal = "bench-user"
        self._rows: dict[str, tuple[Any, list[Any]]] = {}
        """Per session id: its first user row's content and its last 20 rows' contents,
        read after each build for ``framework_cost``."""

    async def open(self) -> None:
        from agentstores.plugins import create_stores
        from agentstores_pydantic_ai import AgentStoresHistory

        dist = "agentstores-postgres" if self.server == "postgres" else "agentstores-redis"
        self.version = f"{dist} {version(dist)}, pydantic-ai-slim {version('pydantic-ai-slim')}"
        self.stores = create_stores(self.url)
        await self.stores.open()
        self.tenant = f"peers-{uuid.uuid4().hex[:8]}"
        self.history = AgentStoresHistory(self.stores, tenant=self.tenant, principal=self.principal)
        self.lister = AgentStoresHistory(self.stores, tenant=self.tenant, principal=LISTER)
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        self._message_json = ModelMessagesTypeAdapter.dump_python([_message(1)], mode="json")[0]

    async def close(self) -> None:
        await self.stores.close()

    async def new(self) -> Session:
        session = uuid.uuid4().hex
        return Session(session, await self.history.load(session))

    async def build(self, conv: Session, start: int, count: int) -> None:
        for first in range(start, start + count, 1000):
            last = min(start + count, first + 1000)
            batch = [_message(n) for n in range(first, last)]
            conv.history = await self.history.append(conv.id, batch, after=conv.history)
        self._rows[conv.id] = await self._stored(conv)

    async def _stored(self, conv: Session) -> tuple[Any, list[Any]]:
        """The contents ``framework_cost`` decodes: the first user row, the last 20."""
        conversation = self.history.conversation(conv.id)
        first = await conversation.message(0, speaker="user")
        key, principal = self.history.identities.key(conv.id)
        info = await self.stores.conversations.get_conversation(key, principal)
        assert first is not None and info is not None
        start = max(0, info.message_count - 20)
        recent = await self.stores.conversations.read_messages(key, principal, start=start)
        return first.content, [row.content for row in recent]

    async def refresh_rows(self, conv: Session) -> None:
        """Read again (untimed) the rows ``framework_cost`` decodes: the timed appends
        changed the last 20."""
        self._rows[conv.id] = await self._stored(conv)

    async def framework_cost(self, op: str, conv: Session) -> None:
        """Pydantic AI's own encoding or decoding for ``op``, no store call: what any
        store of its message histories pays."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter, UserPromptPart

        if op == "append":
            ModelMessagesTypeAdapter.dump_json([_message(0)])
            return
        first, recent = self._rows.get(conv.id) or await self._stored(conv)
        if op == "first_user":
            [request] = ModelMessagesTypeAdapter.validate_python([first])
            str(next(p for p in request.parts if isinstance(p, UserPromptPart)).content)
        elif op == "recent20":
            ModelMessagesTypeAdapter.validate_python(recent)
        else:
            raise ValueError(f"no framework cost for {op!r}")

    async def store_calls(self, op: str, conv: Session) -> None:
        """The agentstores calls ``op`` makes through the bridge, made directly: one
        stored message appended on condition of the tail (which then moves on), the first
        user row, the last 20 rows (``tail``)."""
        from agentstores import Message

        key, principal = self.history.identities.key(conv.id)
        conversations = self.stores.conversations
        if op == "append":
            row = Message(
                id=uuid.uuid4().hex,
                role="assistant",
                content=self._message_json,
                metadata={"pydantic_ai": "response"},  # a row the bridge's loads keep
            )
            await conversations.append_messages(
                key, principal, [row], expected_tail=conv.history.tail
            )
            conv.history.tail = row.id  # the bridge's next append continues after it
        elif op == "first_user":
            await conversations.get_transcript(key, principal, index=0, speaker="user", limit=1)
        elif op == "recent20":
            await conversations.tail(key, principal, 20)
        else:
            raise ValueError(f"no store calls for {op!r}")

    async def append(self, conv: Session, n: int) -> None:
        conv.history = await self.history.append(conv.id, [_message(n)], after=conv.history)

    async def first_user(self, conv: Session) -> str:
        from pydantic_ai.messages import ModelRequest, UserPromptPart

        from agentstores_pydantic_ai.rows import load

        found = await self.history.conversation(conv.id).message(0, speaker="user")
        assert found is not None
        [request] = load([found.content])
        assert isinstance(request, ModelRequest)
        part = next(p for p in request.parts if isinstance(p, UserPromptPart))
        return str(part.content)

    async def recent(self, conv: Session, k: int) -> int:
        return len(await self.history.load(conv.id, limit=k))

    async def add_listed(self, n: int) -> None:
        from agentstores_pydantic_ai import StoredHistory

        session = f"listed-{n}"
        empty = StoredHistory([], session_id=session, tail=None)
        await self.lister.append(session, [_message(0)], after=empty)

    async def list_sessions(self) -> int:
        listed, cursor = 0, None
        while True:
            page = await self.stores.conversations.list_conversations(
                self.tenant, LISTER, limit=LIST_PAGE, cursor=cursor
            )
            listed += len(page.items)
            cursor = page.next_cursor
            if cursor is None:
                return listed

    async def storage_bytes(self) -> int:
        return int(await self._measure())


__all__ = ["PydanticAIBridge", "Session"]
