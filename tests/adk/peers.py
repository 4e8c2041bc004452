"""ADK's own DatabaseSessionService, as the tracker scenarios run it: several service
objects on one database (several servers), on sqlite+aiosqlite or on PostgreSQL in a
private schema; a gate that holds each one's first write until all have reached it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.schemas.v1 import StorageEvent, StorageSession
from sqlalchemy import event as sa_event
from sqlalchemy.util import await_only

PEERS = ("sqlite", "postgres")


@contextlib.asynccontextmanager
async def peer_services(
    kind: str, tmp_path: Path, pg_admin: str | None, count: int = 2
) -> AsyncIterator[list[DatabaseSessionService]]:
    """``count`` DatabaseSessionService objects on one fresh database of ``kind``."""
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / f'adk-{uuid.uuid4().hex[:8]}.db'}"
        kwargs: dict[str, Any] = {}
        schema = None
    else:
        assert pg_admin is not None
        schema = f"adk_peer_{uuid.uuid4().hex[:10]}"
        conn = await asyncpg.connect(pg_admin)
        try:
            await conn.execute(f'CREATE SCHEMA "{schema}"')
        finally:
            await conn.close()
        url = pg_admin.replace("postgresql://", "postgresql+asyncpg://", 1)
        kwargs = {"connect_args": {"server_settings": {"search_path": schema}}}
    services = [DatabaseSessionService(url, **kwargs) for _ in range(count)]
    try:
        yield services
    finally:
        for service in services:
            await service.close()
        if schema is not None:
            assert pg_admin is not None
            conn = await asyncpg.connect(pg_admin)
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await conn.close()


def gate_first_write(
    service: DatabaseSessionService, barrier: asyncio.Barrier, timeout: float
) -> None:
    """Hold ``service``'s next INSERT or UPDATE (once) until every party of ``barrier``
    reached its own, or ``timeout`` passed (a peer that serializes writers never lets
    the second reach it: the first then goes on alone)."""
    done = False

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        nonlocal done
        verb = statement.lstrip()[:6].upper()
        if done or verb not in ("INSERT", "UPDATE"):
            return
        done = True
        with contextlib.suppress(asyncio.TimeoutError, asyncio.BrokenBarrierError):
            await_only(asyncio.wait_for(barrier.wait(), timeout))

    sa_event.listen(service.db_engine.sync_engine, "before_cursor_execute", before)


@contextlib.contextmanager
def loaded_rows() -> Iterator[dict[str, int]]:
    """Counts the event and session rows ADK's database store loads from its tables."""
    counts = {"events": 0, "sessions": 0}

    def on_event(target: Any, context: Any) -> None:
        counts["events"] += 1

    def on_session(target: Any, context: Any) -> None:
        counts["sessions"] += 1

    sa_event.listen(StorageEvent, "load", on_event)
    sa_event.listen(StorageSession, "load", on_session)
    try:
        yield counts
    finally:
        sa_event.remove(StorageEvent, "load", on_event)
        sa_event.remove(StorageSession, "load", on_session)
