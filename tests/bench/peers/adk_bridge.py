"""agentstores-adk on PostgreSQL or on Redis, measured through ADK's session-service API
(the calls an ADK ``Runner`` or ADK's API server makes), beside ``adk_peer``'s
``DatabaseSessionService``: timed appends through ``append_event`` on the session object
the caller holds, the recent 20 through ``num_recent_events``, and ``list_sessions``. ADK
has no call for the first user message: it is read as the bridge documents it, the
store's speaker index on the session's key (``session_key``, one indexed read) and the
row made an ``Event`` (``agentstores_adk.events.from_message``).

``framework_cost`` times ADK's own work alone for each of those (no store call): the
event an append stores built and dumped to JSON, the first user row and the last 20 rows
(read beforehand, untimed) validated into ADK events, the latter into a ``Session``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from .adk_peer import _event
from .systems import LISTER, Listing, System

APP, USER = "bench", "bench-user"


class ADKBridge(System, Listing):
    """``AgentStoresSessionService`` over agentstores-postgres or agentstores-redis."""

    native = "ADK DatabaseSessionService"

    def __init__(
        self, server: str, url: str, measure: Callable[[], Awaitable[int]], over: str
    ) -> None:
        self.server, self.url, self.over = server, url, over
        label = "PostgreSQL" if server == "postgres" else "Redis"
        self.name = f"agentstores-adk ({label})"
        self._measure = measure
        self._rows: dict[str, tuple[Any, list[Any]]] = {}
        """Per session id: its first user row's content and its last 20 rows' contents,
        read after each build for ``framework_cost``."""
        if server != "postgres":  # ADK's own store is measured on PostgreSQL only
            self.native = None

    async def open(self) -> None:
        from agentstores.plugins import create_stores
        from agentstores_adk import AgentStoresSessionService

        adapter = "agentstores-postgres" if self.server == "postgres" else "agentstores-redis"
        self.version = f"agentstores-adk {version('agentstores-adk')}, {adapter} {version(adapter)}"
        self.stores = create_stores(self.url)
        await self.stores.open()
        tenant = f"adk-bench-{uuid.uuid4().hex[:8]}"
        self.service = AgentStoresSessionService(self.stores, tenant=tenant, principal=USER)
        self._event_json = _event(1).model_dump(mode="json", exclude_none=True)
        self.lister = AgentStoresSessionService(self.stores, tenant=tenant, principal=LISTER)

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
        self._rows[conv.id] = await self._stored(conv)

    async def _stored(self, conv: Any) -> tuple[Any, list[Any]]:
        """The contents ``framework_cost`` decodes: the first user row, the last 20."""
        key = self.service.session_key(app_name=APP, user_id=USER, session_id=conv.id)
        conversations = self.stores.conversations
        first = await conversations.get_transcript(key, USER, index=0, speaker="user")
        info = await conversations.get_conversation(key, USER)
        assert first and info is not None
        start = max(1, info.message_count - 20)
        recent = await conversations.read_messages(key, USER, start=start)
        return first[0].content, [row.content for row in recent]

    async def refresh_rows(self, conv: Any) -> None:
        """Read again (untimed) the rows ``framework_cost`` decodes: the timed appends
        changed the last 20."""
        self._rows[conv.id] = await self._stored(conv)

    async def framework_cost(self, op: str, conv: Any) -> None:
        """ADK's own encoding or decoding for ``op``, no store call: what any ADK session
        store pays (its own ``DatabaseSessionService`` too)."""
        from google.adk.events.event import Event
        from google.adk.sessions.session import Session

        if op == "append":
            _event(0).model_dump(mode="json", exclude_none=True)
            return
        first, recent = self._rows.get(conv.id) or await self._stored(conv)
        if op == "first_user":
            str(Event.model_validate(first).content.parts[0].text)
        elif op == "recent20":
            events = [Event.model_validate(content) for content in recent]
            Session(id=conv.id, app_name=APP, user_id=USER, events=events)
        else:
            raise ValueError(f"no framework cost for {op!r}")

    async def store_calls(self, op: str, conv: Any) -> None:
        """The agentstores calls ``op`` makes through the bridge, made directly: an append
        of one stored event with the session's update time merged; the first user row;
        ``get_session``'s three reads at once (the session's ``tail``, its app's state,
        its user's state)."""
        import asyncio

        from agentstores import Message
        from agentstores_adk import keys
        from agentstores_adk.state import UPDATED

        key = self.service.session_key(app_name=APP, user_id=USER, session_id=conv.id)
        conversations = self.stores.conversations
        if op == "append":
            row = Message(
                id=uuid.uuid4().hex,
                role="assistant",
                content=self._event_json,
                metadata={"author": self._event_json["author"]},
            )
            await conversations.append_messages(
                key,
                USER,
                [row],
                create_if_absent=False,
                expected_tail=conv._storage_update_marker,
                metadata={UPDATED: 1.0},
            )
            conv._storage_update_marker = row.id  # the bridge's next append follows it
        elif op == "first_user":
            await conversations.get_transcript(key, USER, index=0, speaker="user", limit=1)
        elif op == "recent20":
            tenant = self.service.identity(APP, USER)[0]
            await asyncio.gather(
                conversations.tail(key, USER, 20),
                conversations.get_conversation(keys.app_state_key(tenant, APP), ""),
                conversations.get_conversation(keys.user_state_key(tenant, APP, USER), USER),
            )
        else:
            raise ValueError(f"no store calls for {op!r}")

    async def append(self, conv: Any, n: int) -> None:
        await self.service.append_event(conv, _event(n))

    async def first_user(self, conv: Any) -> str:
        from agentstores_adk.events import from_message

        key = self.service.session_key(app_name=APP, user_id=USER, session_id=conv.id)
        rows = await self.stores.conversations.get_transcript(key, USER, index=0, speaker="user")
        assert rows, "no user message"
        return str(from_message(rows[0]).content.parts[0].text)

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
        session = await self.lister.create_session(
            app_name=APP, user_id=LISTER, session_id=f"listed-{n}"
        )
        await self.lister.append_event(session, _event(0))

    async def list_sessions(self) -> int:
        return len((await self.lister.list_sessions(app_name=APP, user_id=LISTER)).sessions)

    async def storage_bytes(self) -> int:
        return int(await self._measure())
