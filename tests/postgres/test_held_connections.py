"""What a call costs once the bundle is warm: the pooled connection it runs on is kept
between calls (``Database._held``), not given back to asyncpg's pool and taken again.

What must hold, after each call has run once (its statement prepared on the connection):

- a read or a write is one round trip: it sends one statement (Bind, Execute, Sync) and
  nothing else, and nothing goes to the server between two calls (no reset, no
  rollback, no new connection);
- calls in a row keep their connection: none starts an asyncio task. Giving a connection
  back to asyncpg's pool runs its release in a task of its own (``asyncio.shield``) and
  taking it again goes through the pool's queue, about a fifth of a short call's time,
  without a single extra byte on the wire: counting round trips cannot see it, counting
  tasks does;
- only a call that completed leaves its connection for the next: a call cancelled while
  its statement runs on the server holds up no later call. asyncpg asks the server to
  cancel the statement, on a connection of its own, and the connection stays busy until
  the server answers; should that request be lost (a load balancer or another pooler
  process taking it), the statement runs on, and the next calls still run at once, on
  other connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any
from urllib.parse import urlsplit

from agentstores.models import Message, SupervisionRow
from agentstores_postgres.stores import PostgresStores
from tests.servers.relay import Relay

from .conftest import PgServer
from .test_faults import _key, _row_locked, _through, _waiting_backend

P = "owner"
ROUNDS = 5
ONE_STATEMENT = [b"B", b"E", b"S"]
"""What asyncpg sends to run a statement it has prepared on the connection: Bind,
Execute, Sync (the Sync ends the round trip)."""
CANCEL_REQUEST = (16).to_bytes(4) + (80877102).to_bytes(4)
"""How a cancel request starts: its length, then the cancel code (the backend's pid and
secret follow)."""
PATIENCE = 10.0
"""Seconds a test waits for calls that take milliseconds: a bound on a wait that must
end, not a measure of speed."""


class _Counter(Relay):
    """A relay that reads the messages clients send, from :meth:`watch` on: each
    connection is at a message boundary then (no call is running), so its stream parses
    as type byte and length from there. A connection opened while watching is counted
    in :attr:`opened` (its startup message is not typed)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self._known: dict[int, list[Any]] = {}
        """id -> the list :meth:`request` gets for each connection seen (kept, so an id
        is never reused)."""
        self._streams: dict[int, bytes] | None = None
        self._sent: list[bytes] = []
        self.opened = 0

    def watch(self) -> None:
        self._streams = dict.fromkeys(self._known, b"")
        self._sent.clear()
        self.opened = 0

    def take(self) -> list[bytes]:
        """The types of the messages sent since the last look."""
        sent, self._sent = self._sent, []
        return sent

    def request(self, data: bytes, marks: list[Any]) -> bool:
        connection = id(marks)  # one list per relayed connection, kept while it lives
        if self._streams is None:
            self._known[connection] = marks
            return True
        if connection not in self._streams:
            if connection not in self._known:
                self._known[connection] = marks
                self.opened += 1
            return True
        buf = self._streams[connection] + data
        while len(buf) >= 5 and len(buf) >= (end := 1 + int.from_bytes(buf[1:5])):
            self._sent.append(buf[:1])
            buf = buf[end:]
        self._streams[connection] = buf
        return True


class _LoseCancels(Relay):
    """A relay that loses every cancel request (dropped, its connection closed), as a
    network that routes it elsewhere does; :attr:`lost` is set when one was."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.lost = asyncio.Event()

    def request(self, data: bytes, marks: list[Any]) -> bool:
        if data.startswith(CANCEL_REQUEST):
            self.lost.set()
            return False
        return True


@contextlib.asynccontextmanager
async def _counted(pg: PgServer) -> AsyncIterator[tuple[PostgresStores, _Counter]]:
    """A bundle (push off: only its pool talks to the server) behind a counting relay."""
    parts = urlsplit(pg.url)
    relay = await _Counter(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    try:
        async with PostgresStores(_through(pg.url, relay.port), push=False) as stores:
            yield stores, relay
    finally:
        await relay.close()


@contextlib.contextmanager
def _tasks_started() -> Iterator[list[str]]:
    """What each asyncio task started on this loop while the block runs was started to
    run (its coroutine's name)."""
    loop = asyncio.get_running_loop()
    before = loop.get_task_factory()
    started: list[str] = []

    def factory(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any
    ) -> asyncio.Future[Any]:
        task = before(loop, coro, **kw) if before else asyncio.Task(coro, loop=loop, **kw)
        started.append(getattr(coro, "__qualname__", repr(coro)))
        return task

    loop.set_task_factory(factory)  # type: ignore[arg-type]
    try:
        yield started
    finally:
        loop.set_task_factory(before)


Call = Callable[[int], Awaitable[object]]


async def _warm(stores: PostgresStores) -> list[tuple[str, Call]]:
    """Reads and writes of several stores on one key, runnable round after round, each
    run once (round 0) so its statement is prepared on the connection."""
    key = _key()
    conv, sup, state = stores.conversations, stores.supervision, stores.state
    assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "m", 1))

    async def append(i: int) -> object:
        return await conv.append_messages(key, P, [Message(f"m{i}", "user", i)])

    async def swap(i: int) -> object:
        assert await sup.compare_and_swap(key, P, i + 1, SupervisionRow("running", "m", i + 2))
        return None

    calls: list[tuple[str, Call]] = [
        ("append", append),
        ("swap", swap),
        ("save state", lambda i: state.save(key, P, {"n": i})),
        ("read messages", lambda i: conv.read_messages(key, P)),
        ("read supervision", lambda i: sup.read(key, P)),
        ("load state", lambda i: state.load(key, P)),
        ("now", lambda i: stores.now()),
    ]
    for _, call in calls:
        await call(0)
    return calls


async def test_each_read_and_write_is_one_round_trip_with_nothing_between_calls(
    pg: PgServer,
) -> None:
    """Seen on the wire, call after call: one statement each, and nothing else."""
    async with _counted(pg) as (stores, relay):
        calls = await _warm(stores)
        relay.watch()
        for i in range(1, ROUNDS + 1):
            for name, call in calls:
                await call(i)
                assert relay.take() == ONE_STATEMENT, name
        assert relay.opened == 0, "a call opened a connection"


async def test_calls_in_a_row_keep_their_connection_and_start_no_task(pg: PgServer) -> None:
    """Reads and writes alternate, so each kind takes the connection the other left."""
    async with PostgresStores(pg.url, push=False) as stores:
        calls = await _warm(stores)
        with _tasks_started() as started:
            for i in range(1, ROUNDS + 1):
                for _, call in calls:
                    await call(i)
        assert started == [], "calls gave their connection back to the pool and took it again"


async def test_a_call_cancelled_mid_statement_holds_up_no_later_call(pg: PgServer) -> None:
    """A write waits on a row lock and its caller is cancelled; the cancel request is
    lost, so the statement runs on. Its connection goes back to asyncpg's pool (which
    waits the statement out), not to the next call: kept, it would make that call wait
    for the cancelled statement, or fail at ``command_timeout``."""
    parts = urlsplit(pg.url)
    relay = await _LoseCancels(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    try:
        async with PostgresStores(_through(pg.url, relay.port), push=False) as stores:
            key, other = _key(), _key()
            conv, sup = stores.conversations, stores.supervision
            assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "m", 1))

            async def next_calls() -> int:
                """Writes and reads of another key; the backend the last one ran on."""
                assert await sup.compare_and_swap(other, P, None, SupervisionRow("running", "m", 1))
                assert (await sup.read(other, P)).row.epoch == 1  # type: ignore[union-attr]
                await conv.append_messages(other, P, [Message("m1", "user", 1)])
                await stores.now()
                return int(await stores.db.read(lambda c: c.fetchval("SELECT pg_backend_pid()")))

            async with _row_locked(pg, key, "supervision") as admin:
                cancelled = asyncio.ensure_future(
                    sup.compare_and_swap(key, P, 1, SupervisionRow("running", "m", 2))
                )
                busy = await _waiting_backend(admin, pg.installation.role)
                cancelled.cancel()
                await asyncio.wait_for(relay.lost.wait(), PATIENCE)
                following = asyncio.ensure_future(next_calls())
                done, _ = await asyncio.wait({following}, timeout=PATIENCE)
                running = await admin.fetchval(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", busy
                )
            # the lock is gone: a call that waited for the cancelled statement ends now
            served = await following
            await asyncio.gather(cancelled, return_exceptions=True)
            assert running == "Lock", "the cancelled statement did not run on"
            assert following in done, "a later call waited for the cancelled statement"
            assert served != busy, "a later call ran on the cancelled statement's connection"
    finally:
        await relay.close()
