"""agentstores-openai-agents measured through the SDK's Session API (the same calls as the
SDK's own sessions in :mod:`.openai_peer`), on agentstores-postgres or -redis, but the
first user message, read as the bridge's README shows (the SDK has no query by role: its
own sessions read the whole history); and ``list_sessions``, the bridge's listing of one
user's sessions."""

from __future__ import annotations

import uuid
from importlib.metadata import version
from typing import Any

from .openai_peer import _item, _OpenAISession
from .systems import LISTER, Listing

BUILD_BATCH = 500
"""Items per ``add_items`` in a build: one call is one atomic append of at most 1,000
items."""


class OpenAIBridge(_OpenAISession, Listing):
    """``AgentStoresSession`` over ``url`` (``server`` is "postgres" or "redis");
    ``measure`` returns the bytes its database holds. The SDK's items are plain JSON
    objects: no framework encoding or decoding to time apart."""

    def __init__(self, name: str, server: str, url: str, measure: Any, over: str) -> None:
        self.name, self.server, self.url, self.over = name, server, url, over
        self._measure = measure
        self.principal = "bench-user"
        native = {"postgres": "OpenAI SQLAlchemySession", "redis": "OpenAI RedisSession"}
        self.native = native[server]

    async def open(self) -> None:
        from agentstores.plugins import create_stores

        self.version = f"agentstores-openai-agents {version('agentstores-openai-agents')}"
        self.stores = create_stores(self.url)
        await self.stores.open()
        self.tenant = f"peers-{uuid.uuid4().hex[:8]}"

    async def close(self) -> None:
        await self.stores.close()

    async def new(self) -> Any:
        from agentstores_openai_agents import AgentStoresSession

        return AgentStoresSession(
            uuid.uuid4().hex, self.stores, tenant=self.tenant, principal=self.principal
        )

    async def build(self, conv: Any, start: int, count: int) -> None:
        for first in range(start, start + count, BUILD_BATCH):
            last = min(start + count, first + BUILD_BATCH)
            await conv.add_items([_item(n) for n in range(first, last)])

    async def first_user(self, conv: Any) -> str:
        # The SDK has no query by role; the bridge's conversation has one (its README).
        found = await conv.conversation().message(0, speaker="user")
        return str(found.content["content"])

    async def store_calls(self, op: str, conv: Any) -> None:
        """The agentstores calls ``op`` makes through the bridge, made directly."""
        from agentstores import ConversationKey, Message

        key = ConversationKey(self.tenant, conv.session_id)
        conversations = self.stores.conversations
        if op == "append":
            item = _item(1)
            row = Message(id=uuid.uuid4().hex, role=item["role"], content=item)
            await conversations.append_messages(key, self.principal, [row])
        elif op == "first_user":
            await conversations.get_transcript(
                key, self.principal, index=0, speaker="user", limit=1
            )
        elif op == "recent20":
            await conversations.tail(key, self.principal, 20)
        else:
            raise ValueError(f"no store calls for {op!r}")

    async def add_listed(self, n: int) -> None:
        from agentstores_openai_agents import AgentStoresSession

        session = AgentStoresSession(
            f"listed-{n}", self.stores, tenant=self.tenant, principal=LISTER
        )
        await session.add_items([_item(0)])

    async def list_sessions(self) -> int:
        """How many sessions the listing user has, paging the bridge's listing."""
        from agentstores_openai_agents import list_sessions

        count, cursor = 0, None
        while True:
            page = await list_sessions(
                self.stores, tenant=self.tenant, principal=LISTER, limit=1000, cursor=cursor
            )
            count += len(page.sessions)
            cursor = page.next_cursor
            if cursor is None:
                return count

    async def storage_bytes(self) -> int:
        return int(await self._measure())
