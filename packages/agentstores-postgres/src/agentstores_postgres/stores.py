"""``PostgresStores``: every store on one asyncpg pool, with one lifecycle."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from agentstores.stores import Stores
from agentstores.urls import redact_url

from .conversations import PURGE_BATCH, PostgresConversationStore
from .database import Conn, Database
from .listener import Listener
from .migrations import check_identifier
from .oauth import PostgresOAuthStore
from .pause_tokens import PostgresPauseTokenStore
from .plugin import BACKEND
from .recording import PostgresRecordingStore
from .state import PostgresAgentStateStore
from .supervision import PostgresSupervisionStore
from .urls import Config, parse_url


class PostgresStores(Stores):
    """``postgresql://user@host:port/db?schema=S`` (also ``postgres://``).

    Options (URL query or keywords; keywords win): ``schema`` (default ``agentstores``),
    ``pool_min_size`` (1), ``pool_max_size`` (10), ``acquire_timeout`` (10 s: waiting for
    a free pooled connection), ``reconcile_timeout`` (15 s: learning the outcome of a
    write whose connection broke), ``pgbouncer`` (transaction pooling: no statement
    cache, no session state), ``tombstone_ttl`` (seconds or timedelta; 30 days; at most
    100 years), ``command_timeout`` (seconds, client-side; default 30), ``push`` (default on:
    one extra connection listens for other processes' writes and subscribes to the keys
    this bundle's followers watch, and writes of a followed key publish wake-ups; off
    behind pgbouncer).

    Opening checks the schema version and the role's privileges and runs no DDL; install
    the schema first with ``agentstores schema install``.
    """

    backend = "postgres"
    capabilities = BACKEND.capabilities
    transcript_thresholds = (PURGE_BATCH,)
    listener: Listener | None = None
    """The connection hearing other processes' writes while open with push on."""

    def __init__(self, url: str, **options: Any) -> None:
        self.config: Config = parse_url(url, **options)
        self.schema = check_identifier(self.config.schema, "schema")
        self.db = Database(self.config, self.schema)
        ttl: timedelta = self.config.tombstone_ttl
        self.supervision = PostgresSupervisionStore(self.db, ttl)
        self.recording = PostgresRecordingStore(self.db, ttl)
        self.state = PostgresAgentStateStore(self.db, ttl)
        self.conversations = PostgresConversationStore(self.db, ttl)
        self.pause_tokens = PostgresPauseTokenStore(self.db, ttl)
        self.oauth = PostgresOAuthStore(self.db, ttl)

    def __repr__(self) -> str:
        return f"PostgresStores({redact_url(self.config.dsn)!r}, schema={self.schema!r})"

    async def now(self) -> datetime:
        """The database clock."""

        async def run(conn: Conn) -> datetime:
            moment: datetime = await conn.fetchval("SELECT clock_timestamp()")
            return moment

        return await self.db.read(run)

    async def _open(self) -> None:
        await self.db.open()
        if self.config.pushing:
            self.listener = Listener(self.config, self.schema, self.wakeups)
            await self.listener.start()

    async def _close(self) -> None:
        listener, self.listener = self.listener, None
        try:
            if listener is not None:
                await listener.close()
        finally:
            await self.db.close()
