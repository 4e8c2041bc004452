"""Push: the wake-ups other processes' writes publish, heard on one listening connection.

Every write a follower cares about (a recorded snapshot, a supervision row swapped or
removed, messages appended, an erasure) calls ``wake(tenant, session_id)`` inside the
server-side function (or statement) that writes, in the same transaction. ``wake`` probes
the ``watches`` table by its primary key and, only when a live row names the key,
sends a notification on channel ``agentstores`` carrying :func:`digest` of the schema and
the key, delivered when the write commits and never when it rolls back. No extra round
trip, no content, and no NOTIFY at all for a key nobody follows (a notifying commit
queues behind every other one).

Each bundle with push on keeps one connection outside its pool that ``LISTEN``s on that
channel (:class:`Listener`) and keeps the bundle's rows in ``watches``
(:class:`WatchRows`, the hub's per-key subscriber): a key a follower starts watching gets
a row under the connection's listener id before it counts as pushed, and loses it when
nobody watches it any more. On its health-check beat the listener pushes its rows' expiry
forward (a row outlives a dead listener by at most :data:`WATCH_TTL`) and now and then
deletes every expired row, its own included only if it stalled that long (its next beat
sees rows missing and subscribes again). A notification whose digest is a subscribed
key's wakes that key's watchers (``stores.wakeups``).

``wakeups.remote`` is True only while the connection listens: when it drops (the server
ends it, the network breaks, a beat gets no answer) remote turns False, no key counts as
pushed, and every watcher is woken, so followers go back to polling at once; the listener
reconnects with backoff under a new listener id (deleting the old id's rows) and
subscribes every watched key again, waking its watchers once each is in place (a write
made while it was away is read then).

Behind pgbouncer in transaction mode a session cannot ``LISTEN``: push is off there.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import Set
from datetime import timedelta
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.stores.subscriptions import KeySubscriptions
from agentstores.stores.wakeups import Wakeups

from .migrations import quote_ident
from .urls import Config

log = logging.getLogger(__name__)

CHANNEL = "agentstores"
"""The channel every schema's writes notify on (the payload tells schemas apart)."""
HEALTH_INTERVAL = 5.0
"""Seconds between two beats of the listening connection (health check and refresh)."""
HEALTH_TIMEOUT = 5.0
"""Seconds a beat may take before the connection counts as lost."""
WATCH_TTL = 60.0
"""Seconds a watch row stays live without a refresh: how long a dead listener's keys
keep notifying, at most."""
REFRESH_WITHIN = 30.0
"""A beat pushes forward the expiry of the rows that would expire within this many
seconds (so each row is rewritten about every ``WATCH_TTL - REFRESH_WITHIN`` seconds,
not on every beat)."""
SWEEP_EVERY = 12
"""Beats between two deletions of every expired row (a minute at the default beat)."""
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 5.0
"""Seconds between reconnect attempts: doubling from the first to the most."""


def digest(schema: str, key: ConversationKey) -> str:
    """The payload the writes of ``key`` in ``schema`` publish (``sql/functions/wake.sql``
    computes the same): 16 hex digits of an MD5 of the quoted schema name and the key. A
    collision only wakes a watcher for nothing."""
    text = f"{quote_ident(schema)}{len(key.tenant)}:{key.tenant}{key.session_id}"
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()[:16]


class WatchRows(KeySubscriptions):
    """The listener's per-key subscriptions: a key is subscribed once its row in
    ``watches`` is committed, unsubscribed by deleting it."""

    def __init__(self, listener: Listener) -> None:
        super().__init__(listener.wakeups)
        self.listener = listener

    async def _subscribe(self, keys: Set[ConversationKey]) -> None:
        await self.listener.add_watches(keys)

    async def _unsubscribe(self, keys: Set[ConversationKey]) -> None:
        await self.listener.drop_watches(keys)


class Listener:
    """One bundle's listening connection, its watch rows, and the task that keeps both."""

    def __init__(self, config: Config, schema: str, wakeups: Wakeups) -> None:
        self.config = config
        self.schema = schema
        self.wakeups = wakeups
        self.subscriptions = WatchRows(self)
        self.listener_id: uuid.UUID | None = None
        """This connection's id in ``watches`` (a new one per connection)."""
        self._conn: Any = None
        self._busy = asyncio.Lock()
        """One statement at a time on the listening connection."""
        self._task: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._keys: dict[str, set[ConversationKey]] = {}
        """Digest -> the subscribed keys it stands for (what a notification wakes)."""
        self.connects = 0
        """How many times the connection was opened and subscribed (tests read it)."""
        watches = f"{quote_ident(schema)}.watches"
        self._add = (
            f"INSERT INTO {watches} (tenant, session_id, listener, expires_at) "
            "SELECT k.t, k.s, $3, now() + $4::interval "
            "FROM unnest($1::text[], $2::text[]) AS k(t, s) "
            "ON CONFLICT (tenant, session_id, listener) "
            "DO UPDATE SET expires_at = excluded.expires_at"
        )
        self._drop = (
            f"DELETE FROM {watches} w USING unnest($1::text[], $2::text[]) AS k(t, s) "
            "WHERE w.listener = $3 AND w.tenant = k.t AND w.session_id = k.s"
        )
        self._drop_all = f"DELETE FROM {watches} WHERE listener = $1"
        self._refresh = (
            f"WITH refreshed AS (UPDATE {watches} SET expires_at = now() + $2::interval "
            "WHERE listener = $1 AND expires_at < now() + $3::interval RETURNING 1) "
            f"SELECT count(*) FROM {watches} WHERE listener = $1"
        )
        self._sweep = f"DELETE FROM {watches} WHERE expires_at < now()"

    # --- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Listen, trying once now (open returns listening when the server answers), and
        keep listening in a task that reconnects whenever the connection is lost."""
        try:
            await self._connect()
        except Exception as exc:
            log.warning("push: cannot listen yet (%s); followers poll until it can", exc)
            self._lost.set()
        self.subscriptions.start()
        self._task = asyncio.create_task(self._keep(), name="agentstores-postgres-listener")

    async def close(self) -> None:
        """Stop listening and delete this listener's rows (idempotent); ``remote`` turns
        False."""
        await self.subscriptions.close()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.wakeups.remote = False
        conn, listener = self._conn, self.listener_id
        if conn is not None and listener is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                async with self._busy:
                    await asyncio.wait_for(conn.execute(self._drop_all, listener), 1.0)
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
            old, self.listener_id = self.listener_id, uuid.uuid4()
            if old is not None:  # the previous connection's rows: nobody refreshes them
                await conn.execute(self._drop_all, old)
        except BaseException:
            with contextlib.suppress(Exception):
                conn.terminate()
            raise
        self._conn = conn
        self._lost.clear()
        self.connects += 1
        self._keys.clear()
        self.wakeups.remote = True
        self.subscriptions.resubscribe()  # each watched key is read once it is in place

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
        self.subscriptions.reset()
        if self.wakeups.remote:
            self.wakeups.remote = False
            self._wake_all()
        self._lost.set()

    async def _keep(self) -> None:
        """Beat while the connection is up; reconnect with backoff when not."""
        delay = BACKOFF_FIRST
        beats = 0
        while True:
            if not self._lost.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._lost.wait(), timeout=HEALTH_INTERVAL)
                beats += 1
                if not self._lost.is_set() and not await self._beat(beats % SWEEP_EVERY == 0):
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

    async def _beat(self, sweep: bool) -> bool:
        """Health check: push this listener's rows' expiry forward and, when ``sweep``,
        delete every expired row. False when the connection does not answer in time."""
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT):
                async with self._busy:
                    conn, listener = self._conn, self.listener_id
                    if conn is None or conn.is_closed():
                        return False
                    ttl, within = timedelta(seconds=WATCH_TTL), timedelta(seconds=REFRESH_WITHIN)
                    held = await conn.fetchval(self._refresh, listener, ttl, within)
                    if sweep:
                        await conn.execute(self._sweep)
        except Exception:
            return False
        if held < len(self.subscriptions.active):
            # rows swept while this listener stalled: start over under a fresh id
            log.info(
                "push: %s watch rows of this listener were lost; subscribing again",
                len(self.subscriptions.active) - held,
            )
            await self._renew()
        return True

    async def _renew(self) -> None:
        """Subscribe every watched key again under a new listener id."""
        self.subscriptions.reset()
        async with self._busy:
            old, self.listener_id = self.listener_id, uuid.uuid4()
            self._keys.clear()
            if self._conn is not None and old is not None:
                with contextlib.suppress(Exception):
                    await self._conn.execute(self._drop_all, old)
        self.subscriptions.resubscribe()

    # --- watch rows -------------------------------------------------------------------

    async def add_watches(self, keys: Set[ConversationKey]) -> None:
        """Insert (or renew) the rows of ``keys`` under this connection's id; returns once
        committed, so every write that probes afterwards notifies."""
        for key in keys:
            self._keys.setdefault(digest(self.schema, key), set()).add(key)
        await self._run(self._add, keys, timedelta(seconds=WATCH_TTL))

    async def drop_watches(self, keys: Set[ConversationKey]) -> None:
        """Delete the rows of ``keys`` (nobody here watches them any more)."""
        for key in keys:
            found = self._keys.get(digest(self.schema, key))
            if found is not None:
                found.discard(key)
                if not found:
                    del self._keys[digest(self.schema, key)]
        await self._run(self._drop, keys)

    async def _run(self, sql: str, keys: Set[ConversationKey], *extra: Any) -> None:
        """Run ``sql`` for ``keys`` under this connection's id. A failure counts as the
        connection lost: its id's rows are then deleted whole once connected again (a
        row left behind by a failed delete would otherwise be refreshed for good)."""
        async with self._busy:
            conn, listener = self._conn, self.listener_id
            if conn is None or conn.is_closed() or listener is None:
                raise ConnectionError("the listening connection is down")
            tenants = [k.tenant for k in keys]
            sessions = [k.session_id for k in keys]
            try:
                await conn.execute(sql, tenants, sessions, listener, *extra)
            except Exception:
                if conn is self._conn:
                    self._down()
                raise

    # --- notifications ---------------------------------------------------------------

    def _heard(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        """A write committed somewhere: wake the watchers of the key(s) it names."""
        for key in tuple(self._keys.get(payload, ())):
            self.wakeups.notify(key)

    def _wake_all(self) -> None:
        for key in self.wakeups.watched():
            self.wakeups.notify(key)


__all__ = ["CHANNEL", "Listener", "WatchRows", "digest"]
