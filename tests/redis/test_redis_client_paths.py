"""The client's refusal paths: a demoted primary, an unconfirmed WAITAOF, a script the
server does not know.

What must hold:

- behind Sentinel, a write the primary refuses with ``READONLY`` (a failover demoted it)
  did not run: it is sent again until ``reconnect_window`` ends, succeeds once the server
  named primary accepts writes again, and after the window raises
  :class:`BackendUnavailableError` (never unknown), having changed nothing;
- a batch (``compare_and_swap_many``) refused that way is sent once more, then each row
  is :class:`BackendUnavailableError`;
- a write applied on the primary that ``WAITAOF`` cannot confirm raises
  :class:`UnknownOutcomeError` (it ran, but is not durable as asked); in a batch the row
  that changed nothing is a plain ``False``, the row that swapped is unknown;
- ``wait_aof_replicas`` (a URL option) is asked after every write: on a server with no
  replica the write cannot be confirmed and is :class:`UnknownOutcomeError`;
- a :class:`Script` is identified by the SHA1 of its source, and one the server has never
  seen is loaded on first use and run;
- opening retries a server it cannot reach only within ``reconnect_window``: with a window
  of 0 it connects once and raises :class:`BackendUnavailableError`;
- with no ``connect_timeout`` given, a server that accepts the connection and never
  answers fails the open after the documented 5 s default, never hangs;
- a cluster whose slots are not all served is refused at open
  (:class:`BackendUnavailableError`), not later key by key.

The Sentinel here is a stand-in speaking the one command redis-py asks
(``SENTINEL MASTERS``), naming a private server that ``REPLICAOF`` demotes and
``REPLICAOF NO ONE`` promotes again: the refusals are the server's own.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from agentstores import (
    BackendUnavailableError,
    ConversationKey,
    SupervisionRow,
    Swap,
    UnknownOutcomeError,
)
from agentstores_redis.client import Script
from agentstores_redis.stores import RedisStores
from tests.servers.valkey import ValkeyServer, free_port

from .conftest import with_prefix

SERVICE = "primary"


def key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


def row(epoch: int, mid: str = "m") -> SupervisionRow:
    return SupervisionRow("running", mid, epoch)


def _bulk(value: str) -> bytes:
    raw = value.encode()
    return b"$%d\r\n%b\r\n" % (len(raw), raw)


async def _read_command(reader: asyncio.StreamReader) -> list[bytes] | None:
    line = await reader.readline()
    if not line:
        return None
    assert line.startswith(b"*"), line
    args = []
    for _ in range(int(line[1:])):
        size = int((await reader.readline())[1:])
        args.append((await reader.readexactly(size + 2))[:-2])
    return args


class FakeSentinel:
    """A Sentinel that always names ``primary_port`` as the primary of :data:`SERVICE`
    (``SENTINEL MASTERS``); any other command is answered ``+OK``."""

    def __init__(self, primary_port: int) -> None:
        self.primary_port = primary_port
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FakeSentinel:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    def url(self, **options: object) -> str:
        extra = "".join(f"&{k}={v}" for k, v in options.items())
        return with_prefix(f"redis+sentinel://127.0.0.1:{self.port}/{SERVICE}") + extra

    def _masters(self) -> bytes:
        fields = ["name", SERVICE, "ip", "127.0.0.1", "port", str(self.primary_port)]
        fields += ["flags", "master", "num-other-sentinels", "0", "quorum", "1"]
        return b"*1\r\n*%d\r\n%b" % (len(fields), b"".join(_bulk(f) for f in fields))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (args := await _read_command(reader)) is not None:
                name = b" ".join(args[:2]).upper()
                if name == b"SENTINEL MASTERS":
                    writer.write(self._masters())
                elif args[0].upper() == b"PING":
                    writer.write(b"+PONG\r\n")
                else:
                    writer.write(b"+OK\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@pytest.fixture
def server() -> Iterator[ValkeyServer]:
    """A private server: these tests demote it, or turn its AOF off."""
    with ValkeyServer(appendonly=True, appendfsync="always") as started:
        yield started


@pytest.fixture
async def admin(server: ValkeyServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(port=server.port, protocol=2)
    yield client
    await client.aclose()


async def _demote(admin: aioredis.Redis) -> None:
    """Make the server a replica (of a port nobody listens on): it refuses writes
    ``READONLY`` and keeps its data."""
    await admin.execute_command("REPLICAOF", "127.0.0.1", free_port())
    await admin.execute_command("CONFIG", "RESETSTAT")


async def _readonly_refusals(admin: aioredis.Redis) -> int:
    stats = await admin.info("errorstats")
    return int(stats.get("errorstat_READONLY", {}).get("count", 0))


# --- a demoted primary ------------------------------------------------------------------


async def test_a_write_refused_readonly_succeeds_once_the_primary_takes_writes_again(
    server: ValkeyServer, admin: aioredis.Redis
) -> None:
    """A failover in progress: the write did not run, so it is sent again (within
    ``reconnect_window``) and succeeds once the named primary accepts writes."""
    async with (
        FakeSentinel(server.port) as sentinel,
        RedisStores(sentinel.url(reconnect_window=30)) as s,
    ):
        k = key()
        await _demote(admin)
        write = asyncio.create_task(s.supervision.compare_and_swap(k, "p", None, row(1)))
        for _ in range(3000):  # until the server has refused it once
            if write.done() or await _readonly_refusals(admin) >= 1:
                break
            await asyncio.sleep(0.01)
        assert not write.done(), "the refused write was given up, not sent again"
        await admin.execute_command("REPLICAOF", "NO", "ONE")
        assert await write is True
        view = await s.supervision.read(k, "p")
        assert view.row is not None and view.row.epoch == 1
        await s.purge()


async def test_a_primary_that_stays_readonly_is_unavailable_after_the_window(
    server: ValkeyServer, admin: aioredis.Redis
) -> None:
    """The write is retried through the whole window (not given up at the first
    refusal), then raised as BackendUnavailableError: it never ran, so never unknown."""
    async with (
        FakeSentinel(server.port) as sentinel,
        RedisStores(sentinel.url(reconnect_window=1)) as s,
    ):
        k = key()
        await _demote(admin)
        with pytest.raises(BackendUnavailableError) as caught:
            await s.supervision.compare_and_swap(k, "p", None, row(1))
        assert not isinstance(caught.value, UnknownOutcomeError)
        assert "read-only" in str(caught.value)
        assert await _readonly_refusals(admin) > 1, "sent again within the window"
        await admin.execute_command("REPLICAOF", "NO", "ONE")
        assert (await s.supervision.read(k, "p")).row is None, "nothing was written"
        await s.purge()


async def test_a_batch_refused_readonly_is_sent_once_more_then_unavailable(
    server: ValkeyServer, admin: aioredis.Redis
) -> None:
    """compare_and_swap_many on a demoted primary: the refused batch did not run, is
    sent once more after a pause, and each row then ends BackendUnavailableError."""
    async with (
        FakeSentinel(server.port) as sentinel,
        RedisStores(sentinel.url(reconnect_window=1)) as s,
    ):
        keys = [key(), key()]
        await _demote(admin)
        outcomes = await s.supervision.compare_and_swap_many(
            [Swap(k, "p", None, row(1)) for k in keys]
        )
        for outcome in outcomes:
            assert isinstance(outcome.error, BackendUnavailableError), outcome
            assert not isinstance(outcome.error, UnknownOutcomeError)
        assert await _readonly_refusals(admin) == 2, "the first send and one more"
        await admin.execute_command("REPLICAOF", "NO", "ONE")
        for k in keys:
            assert (await s.supervision.read(k, "p")).row is None
        await s.purge()


# --- WAITAOF not confirmed --------------------------------------------------------------


async def test_a_write_waitaof_cannot_confirm_is_unknown_and_a_no_op_is_plain(
    server: ValkeyServer, admin: aioredis.Redis
) -> None:
    """``wait_aof_local=1`` with the AOF turned off after opening: WAITAOF fails, so a
    write that changed something is UnknownOutcomeError (it ran, not durable as asked),
    in a batch too, while a row whose CAS changed nothing is a plain False."""
    async with RedisStores(with_prefix(server.url), wait_aof_local=1) as s:
        done, swapped, refused = key(), key(), key()
        assert await s.supervision.compare_and_swap(refused, "p", None, row(1))
        await admin.config_set("appendonly", "no")  # a private server: left so
        with pytest.raises(UnknownOutcomeError, match="WAITAOF"):
            await s.supervision.compare_and_swap(done, "p", None, row(1))
        view = await s.supervision.read(done, "p")
        assert view.row is not None and view.row.epoch == 1, "it ran on the primary"

        outcomes = await s.supervision.compare_and_swap_many(
            [Swap(swapped, "p", None, row(1)), Swap(refused, "p", 7, row(8))]
        )
        assert isinstance(outcomes[0].error, UnknownOutcomeError), outcomes[0]
        assert "WAITAOF" in str(outcomes[0].error)
        assert outcomes[1].error is None and outcomes[1].swapped is False, outcomes[1]
        view = await s.supervision.read(refused, "p")
        assert view.row is not None and view.row.epoch == 1, "the refused CAS changed nothing"
        await s.purge()


# --- scripts ----------------------------------------------------------------------------


async def test_a_script_is_its_source_sha1_and_is_loaded_on_first_use(
    server: ValkeyServer,
) -> None:
    """A Script made at run time (as a caller of the client makes one) is named by the
    SHA1 of its source, what EVALSHA runs; the server has never seen it, so the first
    call loads it (NOSCRIPT) and runs it."""
    marker = uuid.uuid4().hex
    source = f"#!lua flags=no-writes\nreturn {{'{marker}', ARGV[1]}}"
    script = Script("probe", source, write=False)
    assert script.sha == hashlib.sha1(source.encode("utf-8")).hexdigest()
    async with RedisStores(with_prefix(server.url)) as s:
        assert await s.client.read(script, [f"{marker}:k"], ["x"]) == [marker.encode(), b"x"]
        exists = await s.client.on_primaries("SCRIPT", "EXISTS", script.sha)
        assert exists == [[1]]


# --- WAITAOF on replicas ----------------------------------------------------------------


async def test_wait_aof_replicas_from_the_url_is_asked_after_every_write(
    valkey_server: ValkeyServer,
) -> None:
    """``?wait_aof_replicas=1`` on a server with no replica: the write ran but no replica
    can confirm it, so it is UnknownOutcomeError; without the option the same write is
    plainly True."""
    url = with_prefix(valkey_server.url)
    async with RedisStores(f"{url}&wait_aof_replicas=1&wait_timeout_ms=50") as s:
        with pytest.raises(UnknownOutcomeError, match="WAITAOF"):
            await s.supervision.compare_and_swap(key(), "p", None, row(1))
    async with RedisStores(url) as s:
        assert await s.supervision.compare_and_swap(key(), "p", None, row(1)) is True
        await s.purge()


# --- opening: unreachable, silent, partly served ----------------------------------------


class _Listener:
    """Accepts TCP connections and counts them; ``silent`` keeps each open and never
    answers, otherwise each is closed at once (a server going away under the client)."""

    def __init__(self, *, silent: bool) -> None:
        self.silent = silent
        self.accepted = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._held: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> _Listener:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        for writer in self._held:
            writer.close()
        self._server.close()

    def url(self, **options: object) -> str:
        extra = "".join(f"&{k}={v}" for k, v in options.items())
        return with_prefix(f"redis://127.0.0.1:{self.port}/0") + extra

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.silent:
            self._held.append(writer)
        else:
            writer.close()


async def test_a_zero_reconnect_window_connects_once_then_is_unavailable() -> None:
    """``reconnect_window=0``: no pause fits in the window, so opening connects once and
    raises BackendUnavailableError (a retry never starts past the window's end)."""
    async with _Listener(silent=False) as listener:
        with pytest.raises(BackendUnavailableError, match="cannot open"):
            await RedisStores(listener.url(reconnect_window=0)).open()
        assert listener.accepted == 1, "retried past the end of the window"


async def test_a_silent_server_fails_the_open_by_the_default_connect_timeout() -> None:
    """No ``connect_timeout`` given: a server that accepts and never answers the
    handshake fails the open with BackendUnavailableError after the default 5 s, instead
    of holding the caller forever."""
    async with _Listener(silent=True) as listener:
        stores = RedisStores(listener.url())
        with pytest.raises(BackendUnavailableError, match=r"no handshake within 5\.0 s"):
            await asyncio.wait_for(stores.open(), 30)
        assert listener.accepted >= 1


async def test_a_cluster_with_unserved_slots_is_refused_at_open() -> None:
    """A one-node cluster serving half the slots: opening fails with
    BackendUnavailableError naming the uncovered slots, rather than opening and failing
    every key of the other half later."""
    bus = free_port()
    args = ("--cluster-enabled", "yes", "--cluster-port", str(bus))
    with ValkeyServer(extra_args=args) as node:
        node.command("CLUSTER", "ADDSLOTSRANGE", "0", "8191")
        url = with_prefix(f"redis+cluster://127.0.0.1:{node.port}")
        with pytest.raises(BackendUnavailableError, match="cover"):
            await RedisStores(url).open()
