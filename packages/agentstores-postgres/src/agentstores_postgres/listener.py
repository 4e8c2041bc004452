"""Push: the wake-ups other processes' writes publish, heard on one listening connection.

Every write a follower cares about (a recorded snapshot, a supervision row swapped or
removed, messages appended, an erasure) calls ``wake(tenant, session_id)`` inside the
server-side function (or statement) that writes, in the same transaction: a notification
on channel ``agentstores`` carrying :func:`digest` of the schema and the key, delivered
when the write commits and never when it rolls back. No extra round trip, no content.

Each bundle with push on keeps one connection outside its pool that ``LISTEN``s on that
channel (:class:`Listener`); a notification whose digest is one of a watched key's wakes
that key's watchers (``stores.wakeups``). ``wakeups.remote`` is True only while the
connection listens: when it drops (the server ends it, the network breaks, a health check
gets no answer) remote turns False and every watcher is woken, so followers go back to
polling at once; the listener reconnects with backoff, and once listening again it sets
remote and wakes every watcher (a write made while it was away is read then).

Behind pgbouncer in transaction mode a session cannot ``LISTEN``: push is off there.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.stores.wakeups import Wakeups

from .migrations import quote_ident
from .urls import Config

log = logging.getLogger(__name__)

CHANNEL = "agentstores"
"""The channel every schema's writes notify on (the payload tells schemas apart)."""
HEALTH_INTERVAL = 5.0
"""Seconds between two health checks of the listening connection."""
HEALTH_TIMEOUT = 5.0
"""Seconds a health check may take before the connection counts as lost."""
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 5.0
"""Seconds between reconnect attempts: doubling from the first to the most."""


def digest(schema: str, key: ConversationKey) -> str:
    """The payload the writes of ``key`` in ``schema`` publish (``sql/functions/wake.sql``
    computes the same): 16 hex digits of an MD5 of the quoted schema name and the key. A
    collision only wakes a watcher for nothing."""
    text = f"{quote_ident(schema)}{len(key.tenant)}:{key.tenant}{key.session_id}"
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()[:16]


class Listener:
    """One bundle's listening connection and the task that keeps it up."""

    def __init__(self, config: Config, schema: str, wakeups: Wakeups) -> None:
        self.config = config
        self.schema = schema
        self.wakeups = wakeups
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._digests: dict[ConversationKey, str] = {}
        self.connects = 0
        """How many times the connection was opened and subscribed (tests read it)."""

    # --- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Listen, trying once now (open returns listening when the server answers), and
        keep listening in a task that reconnects whenever the connection is lost."""
        try:
            await self._connect()
        except Exception as exc:
            log.warning("push: cannot listen yet (%s); followers poll until it can", exc)
            self._lost.set()
        self._task = asyncio.create_task(self._keep(), name="agentstores-postgres-listener")

    async def close(self) -> None:
        """Stop listening (idempotent); ``remote`` turns False."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.wakeups.remote = False
        await self._drop_connection()

    @property
    def server_pid(self) -> int | None:
        """The listening connection's server process, when connected."""
        conn = self._conn
        return None if conn is None or conn.is_closed() else conn.get_server_pid()

    # --- the connection ------------------------------------------------------------

    async def _connect(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(
            self.config.dsn,
            timeout=self.config.acquire_timeout,
            server_settings={"application_name": "agentstores-listener"},
        )
        try:
            conn.add_termination_listener(self._terminated)
            await conn.add_listener(CHANNEL, self._heard)
        except BaseException:
            with contextlib.suppress(Exception):
                conn.terminate()
            raise
        self._conn = conn
        self._lost.clear()
        self.connects += 1
        self.wakeups.remote = True
        self._wake_all()  # what changed while nobody listened is read now

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        with contextlib.suppress(Exception):
            conn.remove_termination_listener(self._terminated)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.close(), timeout=1.0)
        with contextlib.suppress(Exception):
            conn.terminate()

    def _terminated(self, conn: Any) -> None:
        if conn is self._conn:
            self._down()

    def _down(self) -> None:
        """The connection is lost: followers poll again, now."""
        if self.wakeups.remote:
            self.wakeups.remote = False
            self._wake_all()
        self._lost.set()

    async def _keep(self) -> None:
        """Health-check the connection while it is up; reconnect with backoff when not."""
        delay = BACKOFF_FIRST
        while True:
            if not self._lost.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._lost.wait(), timeout=HEALTH_INTERVAL)
                if not self._lost.is_set() and not await self._healthy():
                    self._down()
                if not self._lost.is_set():
                    delay = BACKOFF_FIRST
                    continue
            await self._drop_connection()
            try:
                await self._connect()
            except Exception as exc:
                log.info("push: reconnecting the listener failed (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)

    async def _healthy(self) -> bool:
        conn = self._conn
        if conn is None or conn.is_closed():
            return False
        try:
            await asyncio.wait_for(conn.fetchval("SELECT 1"), timeout=HEALTH_TIMEOUT)
        except Exception:
            return False
        return True

    # --- notifications ---------------------------------------------------------------

    def _heard(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        """A write committed somewhere: wake the watchers of the key(s) it names."""
        for key in self.wakeups.watched():
            if self._digest(key) == payload:
                self.wakeups.notify(key)

    def _digest(self, key: ConversationKey) -> str:
        found = self._digests.get(key)
        if found is None:
            if len(self._digests) > 4096:
                self._digests.clear()
            found = self._digests[key] = digest(self.schema, key)
        return found

    def _wake_all(self) -> None:
        for key in self.wakeups.watched():
            self.wakeups.notify(key)


__all__ = ["CHANNEL", "Listener", "digest"]
