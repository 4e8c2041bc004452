"""agentstores-openai-agents measured through the SDK's Session API (the same four calls as
the SDK's own sessions in :mod:`.openai_peer`), on agentstores-postgres or -redis; and
``list_sessions``, the bridge's listing of one user's sessions."""

from __future__ import annotations

import uuid
from importlib.metadata import version
from typing import Any

from .openai_peer import _item, _OpenAISession

BUILD_BATCH = 500
"""Items per ``add_items`` in a build: one call is one atomic append of at most 1,000 rows,
and a user item takes two (itself and its gap marker)."""


class OpenAIBridge(_OpenAISession):
    """``AgentStoresSession`` over ``url`` (``server`` is "postgres" or "redis");
    ``measure`` returns the bytes its database holds."""

    def __init__(self, name: str, server: str, url: str, measure: Any) -> None:
        self.name, self.server, self.url = name, server, url
        self._measure = measure
        self.principal = "bench-user"

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

    async def list_sessions(self) -> int:
        """How many sessions the bench user has, paging the bridge's listing."""
        from agentstores_openai_agents import list_sessions

        count, cursor = 0, None
        while True:
            page = await list_sessions(
                self.stores, tenant=self.tenant, principal=self.principal, limit=1000, cursor=cursor
            )
            count += len(page.sessions)
            cursor = page.next_cursor
            if cursor is None:
                return count

    async def storage_bytes(self) -> int:
        return int(await self._measure())
