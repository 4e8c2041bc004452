"""agentstores-adk on PostgreSQL or on Redis, measured through ADK's session-service API
(the calls an ADK ``Runner`` or ADK's API server makes), beside ``adk_peer``'s
``DatabaseSessionService``: timed appends through ``append_event`` on the session object
the caller holds, the first user message through ``get_session`` with an
:class:`~agentstores_adk.EventPage` (a page from the start, 20 events at a time until one
is the user's), the recent 20 through ``num_recent_events``, and ``list_sessions``.

Not wired into ``__main__`` here: the harness lists its systems in ``_systems``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from .adk_peer import _event
from .systems import System

APP, USER = "bench", "bench-user"
FIRST_PAGE = 20


class ADKBridge(System):
    """``AgentStoresSessionService`` over agentstores-postgres or agentstores-redis."""

    def __init__(self, server: str, url: str, measure: Callable[[], Awaitable[int]]) -> None:
        self.server, self.url = server, url
        label = "PostgreSQL" if server == "postgres" else "Redis"
        self.name = f"agentstores-adk ({label})"
        self._measure = measure

    async def open(self) -> None:
        from agentstores.plugins import create_stores
        from agentstores_adk import AgentStoresSessionService

        adapter = "agentstores-postgres" if self.server == "postgres" else "agentstores-redis"
        self.version = f"agentstores-adk {version('agentstores-adk')}, {adapter} {version(adapter)}"
        self.stores = create_stores(self.url)
        await self.stores.open()
        self.service = AgentStoresSessionService(
            self.stores, tenant=f"adk-bench-{uuid.uuid4().hex[:8]}", principal=USER
        )

    async def close(self) -> None:
        await self.stores.close()

    async def new(self) -> Any:
        return await self.service.create_session(
            app_name=APP, user_id=USER, session_id=uuid.uuid4().hex
        )

    async def build(self, conv: Any, start: int, count: int) -> None:
        # The messages append_event would write, 1,000 to a store call (ADK has no bulk
        # append); the session object then holds the new tail, as after append_event.
        from agentstores_adk.events import to_message
        from agentstores_adk.state import UPDATED

        key = self.service.session_key(app_name=APP, user_id=USER, session_id=conv.id)
        for first in range(start, start + count, 1000):
            events = [_event(n) for n in range(first, min(start + count, first + 1000))]
            await self.stores.conversations.append_messages(
                key,
                USER,
                [to_message(e) for e in events],
                metadata={UPDATED: events[-1].timestamp},
            )
            conv._storage_update_marker = events[-1].id
            conv.last_update_time = events[-1].timestamp

    async def append(self, conv: Any, n: int) -> None:
        await self.service.append_event(conv, _event(n))

    async def first_user(self, conv: Any) -> str:
        from agentstores_adk import EventPage

        start = 0
        while True:
            session = await self.service.get_session(
                app_name=APP,
                user_id=USER,
                session_id=conv.id,
                config=EventPage(start=start, limit=FIRST_PAGE),
            )
            assert session is not None and session.events, "no user message"
            for event in session.events:
                if event.author == "user":
                    return str(event.content.parts[0].text)
            start += FIRST_PAGE

    async def recent(self, conv: Any, k: int) -> int:
        from google.adk.sessions.base_session_service import GetSessionConfig

        session = await self.service.get_session(
            app_name=APP,
            user_id=USER,
            session_id=conv.id,
            config=GetSessionConfig(num_recent_events=k),
        )
        assert session is not None
        return len(session.events)

    async def list_sessions(self) -> int:
        """How many sessions the bench user has, through ``list_sessions``."""
        return len((await self.service.list_sessions(app_name=APP, user_id=USER)).sessions)

    async def storage_bytes(self) -> int:
        return int(await self._measure())
