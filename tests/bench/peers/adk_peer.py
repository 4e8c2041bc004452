"""Google ADK's ``DatabaseSessionService`` on PostgreSQL (asyncpg). Timed appends go
through ``append_event`` on the session object the caller holds (no reload, the cheapest
way); reads through ``get_session``, with ``num_recent_events`` for the recent 20."""

from __future__ import annotations

import uuid
from importlib.metadata import version
from typing import Any

from .systems import LISTER, Listing, System, postgres_bytes, text_of

APP, USER = "bench", "bench-user"


def _event(n: int) -> Any:
    from google.adk.events import Event
    from google.genai import types

    user = n % 2 == 0
    return Event(
        author="user" if user else "agent",
        invocation_id=f"inv{n // 2}",
        content=types.Content(
            role="user" if user else "model", parts=[types.Part(text=text_of(n))]
        ),
    )


class ADKPeer(System, Listing):
    name, server = "ADK DatabaseSessionService", "postgres"

    def __init__(self, url: str) -> None:
        self.url = url

    async def open(self) -> None:
        from google.adk.sessions import DatabaseSessionService

        self.version = f"google-adk {version('google-adk')}"
        self.service = DatabaseSessionService(
            db_url=self.url.replace("postgresql://", "postgresql+asyncpg://")
        )

    async def close(self) -> None:
        await self.service.close()

    async def new(self) -> Any:
        return await self.service.create_session(
            app_name=APP, user_id=USER, session_id=uuid.uuid4().hex
        )

    async def build(self, conv: Any, start: int, count: int) -> None:
        # ADK has no bulk append, and append_event costs a dozen statements and a commit
        # (10,000 of them take minutes here). The build adds the rows append_event would
        # add, made by ADK's own StorageEvent.from_event, in one transaction per 1,000;
        # the timed appends go through append_event.
        service = self.service
        schema = service._get_schema_classes()
        for first in range(start, start + count, 1000):
            last = min(start + count, first + 1000)
            async with service._rollback_on_exception_session() as sql:
                sql.add_all(
                    [schema.StorageEvent.from_event(conv, _event(n)) for n in range(first, last)]
                )
                await sql.commit()

    async def append(self, conv: Any, n: int) -> None:
        await self.service.append_event(conv, _event(n))

    async def first_user(self, conv: Any) -> str:
        session = await self.service.get_session(app_name=APP, user_id=USER, session_id=conv.id)
        assert session is not None
        event = next(e for e in session.events if e.author == "user")
        return str(event.content.parts[0].text)

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

    async def add_listed(self, n: int) -> None:
        session = await self.service.create_session(
            app_name=APP, user_id=LISTER, session_id=f"listed-{n}"
        )
        await self.service.append_event(session, _event(0))

    async def list_sessions(self) -> int:
        listed = await self.service.list_sessions(app_name=APP, user_id=LISTER)
        return len(listed.sessions)

    async def storage_bytes(self) -> int:
        return await postgres_bytes(self.url)
