"""The connection layer: one redis-py asyncio client (standalone, cluster, or the primary
Sentinel names), scripts registered once and run with EVALSHA, and an exact account of
what a failure means.

redis-py retries a command after a connection error by default. For a script that
writes, a retry after the first attempt landed would apply it twice, so every client
here is built with retries off and this module decides instead:

- a value that cannot be encoded (a lone surrogate, a bool) is found while packing,
  before any connection is taken: :class:`Unencodable`, the caller's mistake, never an
  unknown outcome (nothing was sent and no connection is dropped);
- a failure while *getting* a ready connection (connect refused, pool exhausted) means
  the command was never sent: :class:`NotSent`;
- a failure after the command was handed to the socket means it may or may not have
  run: :class:`Uncertain`. Stores reconcile it through the nonce each write leaves in
  the key's header, or raise :class:`~agentstores.errors.UnknownOutcomeError`;
- ``NOSCRIPT`` (a restarted or failed-over server) means the script did not run: it is
  loaded on that connection and sent again;
- read-only scripts and idempotent index commands are simply sent once more.

Behind Sentinel the client is the standalone one, over redis-py's
``SentinelConnectionPool``: each new connection asks the Sentinels for the primary's
address, so after a failover a dropped connection reconnects to the new primary (within
``reconnect_window``, as after a restart), and an exchange broken by the failover is
:class:`Uncertain` like any other. A demoted primary that keeps its clients (a
coordinated failover) refuses writes with ``READONLY`` before running them: that
connection is dropped, the Sentinels are asked again, and the write is sent again on a
connection to the new primary (not run, so safe to send); a kept connection whose address
is no longer the primary's is dropped before it is used, so reads do not stay on the old
primary either.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection, Connection, ConnectionPool, parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    ClusterDownError,
    DataError,
    MovedError,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from agentstores.urls import redact_url

from .sentinel import SentinelTarget, is_sentinel_url, parse_sentinel_url

# redis-py's private hiredis parser: a reply already buffered is taken from its reader
# directly (see _pipeline), which saves a few microseconds per reply of every MULTI/EXEC.
# Private modules move without notice, so the adapter admits redis-py >=7.2,<9 only (its
# pyproject), and the tests run at both ends of that range: tests-redis on the newest the
# lock pins, tests-redis-floor on 7.2.0; test_redis_plain_reads fails if the reader is not
# found. Another layout still works, through read_response alone.
try:
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _AsyncHiredisParser
except ImportError:  # pragma: no cover - another redis-py layout: read_response only
    _NOT_ENOUGH_DATA = None
    _AsyncHiredisParser = type(None)  # type: ignore[assignment,misc]

try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - without the hiredis extra
    _hiredis_pack = None  # type: ignore[assignment]
_pack_command: Callable[[tuple[Any, ...]], bytes] | None = _hiredis_pack

log = logging.getLogger(__name__)

EncodableT = bytes | str | int | float


STANDALONE = "server"
"""The name :meth:`RedisClient.servers` gives the one server of a standalone deployment."""


class NotSent(Exception):
    """No command reached the server (connect failed, pool exhausted, topology gone)."""

    def __init__(self, message: str, *, exhausted: bool = False) -> None:
        super().__init__(message)
        self.exhausted = exhausted


class Unencodable(Exception):
    """A command argument has no RESP encoding (a lone surrogate, a bool): nothing was sent."""


class Uncertain(Exception):
    """The connection failed after the command was sent: it may or may not have run."""


class NotDurable(Exception):
    """The write ran on the primary but WAIT / WAITAOF did not confirm it in time."""

    def __init__(self, reply: Any, detail: str) -> None:
        super().__init__(detail)
        self.reply = reply


@dataclass(frozen=True)
class Script:
    """One Lua script, identified by the SHA1 of its source (what EVALSHA takes)."""

    name: str
    source: str
    write: bool
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode("utf-8")).hexdigest())


Call = tuple[Script | None, Sequence[str], Sequence[EncodableT]]
"""A script with its KEYS and ARGV, or ``(None, [routing key], command args)``."""
Request = tuple[bytes, int]
"""Commands packed in RESP, and how many there are (:func:`packed`)."""


@dataclass(frozen=True)
class ClientOptions:
    pool_size: int = 32
    pool_timeout: float = 5.0
    socket_timeout: float | None = 10.0
    connect_timeout: float = 5.0
    wait_replicas: int = 0
    wait_aof_local: int = 0
    wait_aof_replicas: int = 0
    wait_timeout_ms: int = 1000
    client_name: str = "agentstores"
    reconnect_window: float = 3.0
    """How long a call keeps trying to get a connection while the server cannot be
    reached (a restart, a failover): safe for every call, since nothing was sent."""


_NOT_RUN = (
    "NOSCRIPT",
    "OOM",
    "READONLY",
    "BUSY ",
    "LOADING",
    "MASTERDOWN",
    "NOREPLICAS",
    "CLUSTERDOWN",
    "MOVED",
    "ASK",
    "TRYAGAIN",
    "CROSSSLOT",
    "NOPERM",
    "NOAUTH",
    "WRONGPASS",
)
"""Error replies that mean the server refused the command before running it."""


def refused_before_run(exc: ResponseError) -> bool:
    return str(exc).startswith(_NOT_RUN)


class RedisClient:
    """One logical connection to a Redis/Valkey deployment."""

    def __init__(
        self, url: str, *, cluster: bool, options: ClientOptions, scripts: Sequence[Script]
    ) -> None:
        self.url = url
        self.cluster = cluster
        self.options = options
        self.scripts = {s.name: s for s in scripts}
        self.sentinel = parse_sentinel_url(url) if is_sentinel_url(url) else None
        """Where the Sentinels are and the service they name (a ``redis+sentinel://`` URL)."""
        self._sentinels: Sentinel | None = None
        self._standalone: Redis | None = None
        self._pool: ConnectionPool | None = None
        """Standalone: a ``BlockingConnectionPool``; behind Sentinel redis-py's
        ``SentinelConnectionPool`` (which never has to block: a caller takes a connection
        only holding one of :attr:`_slots`, one per pooled connection)."""
        self._idle: list[Connection] = []
        """Standalone connections this client took from the pool and holds, ready: taking
        one back costs a list pop, where the pool's checkout costs a lock, a condition,
        a timer and its metrics on every call (a third of a short script call's time)."""
        self._cluster: RedisCluster | None = None
        self._slots: asyncio.Semaphore | None = None
        """One permit per pooled connection, taken before a connection and given back
        after it: callers wait here, first come first served, never on the pool itself.
        (redis-py's pool waits on a condition, and before Python 3.13 a waiter its timeout
        cancelled as it was notified dropped the notification; and a standalone connection
        kept in :attr:`_idle` never reached a caller waiting in the pool, so with more
        callers than connections the waiters starved until ``pool_timeout``.)"""
        self._refresh = False
        self._refresh_lock = asyncio.Lock()
        self._waits = self._wait_commands()

    # --- lifecycle ------------------------------------------------------------------

    async def open(self) -> None:
        o = self.options
        self._slots = asyncio.Semaphore(o.pool_size)
        common: dict[str, Any] = {
            # replies are bounded by asyncio.timeout around each exchange (_pipeline): the
            # driver's own socket timeout would start a task for every send
            "socket_timeout": None,
            "socket_connect_timeout": o.connect_timeout,
            "retry": Retry(NoBackoff(), 0),
            "client_name": o.client_name,
            "health_check_interval": 0,
            "protocol": 2,
        }
        if self.cluster:
            self._cluster = RedisCluster.from_url(
                self.url,
                max_connections=o.pool_size,
                require_full_coverage=True,
                **common,
            )
            try:
                await self._cluster.initialize()
            except Exception as exc:
                raise NotSent(f"cannot reach the cluster at {redact_url(self.url)}: {exc}") from exc
        elif self.sentinel is not None:
            self._pool = self._sentinel_pool(self.sentinel, common)
            self._standalone = Redis(connection_pool=self._pool)
        else:
            self._pool = BlockingConnectionPool.from_url(
                self.url, max_connections=o.pool_size, timeout=o.pool_timeout, **common
            )
            self._standalone = Redis(connection_pool=self._pool)
        await self.load_scripts()

    def _sentinel_pool(self, target: SentinelTarget, common: dict[str, Any]) -> ConnectionPool:
        """redis-py's pool of connections to the primary ``target``'s Sentinels name; the
        data nodes' settings are read from the URL by redis-py's own parser."""
        o = self.options
        node = {k: v for k, v in parse_url(target.node_url).items() if k not in ("host", "port")}
        asked = {
            # a Sentinel that does not answer is skipped for the next: bounded like a connect
            "socket_timeout": o.connect_timeout,
            "socket_connect_timeout": o.connect_timeout,
            "client_name": f"{o.client_name}-sentinel",
            "protocol": 2,
        }
        if target.sentinel_username is not None:
            asked["username"] = target.sentinel_username
        if target.sentinel_password is not None:
            asked["password"] = target.sentinel_password
        self._sentinels = Sentinel(target.sentinels, sentinel_kwargs=asked)
        node.pop("connection_class", None)
        return SentinelConnectionPool(  # type: ignore[no-untyped-call]
            target.service_name,
            self._sentinels,
            max_connections=o.pool_size,
            connection_class=_PrimaryConnection,
            **{**node, **common},
        )

    def _on_primary(self, conn: Connection) -> bool:
        """Whether a kept connection still goes to the primary the Sentinels last named
        (any new connection asks them; always True without Sentinel)."""
        if self.sentinel is None:
            return True
        address = getattr(self._pool, "master_address", None)
        return address is None or (conn.host, conn.port) == tuple(address)

    async def _demoted(self, conn: Connection) -> None:
        """``conn``'s server refused a write as a replica (``READONLY``): a failover moved
        the primary. Drop the connection and ask the Sentinels again, so kept connections
        to the old primary are dropped too (:meth:`_on_primary`)."""
        await _drop(conn)
        pool = self._pool
        if isinstance(pool, SentinelConnectionPool):
            with contextlib.suppress(Exception):  # the next connect asks them again
                await pool.get_master_address()  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            await cluster.aclose()
        if self._standalone is not None:
            client, self._standalone = self._standalone, None
            idle, self._idle = self._idle, []
            if self._pool is not None:
                for conn in idle:
                    await self._pool.release(conn)
            await client.aclose()
            if self._pool is not None:
                await self._pool.disconnect()
                self._pool = None
        if self._sentinels is not None:
            sentinels, self._sentinels = self._sentinels, None
            for asked in sentinels.sentinels:  # Sentinel.aclose is not in redis-py 7.2
                await asked.aclose()

    @property
    def redis(self) -> Redis | RedisCluster:
        """The underlying redis-py client (for administration and tests)."""
        client = self._cluster if self.cluster else self._standalone
        if client is None:
            raise NotSent("the client is closed")
        return client

    async def load_scripts(self) -> None:
        """SCRIPT LOAD every script on every primary, once."""
        for node in await self._primaries():
            calls: list[Call] = [
                (None, [], ("SCRIPT", "LOAD", s.source)) for s in self.scripts.values()
            ]
            replies = await self._on_node(node, calls)
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply

    async def _primaries(self) -> list[Any]:
        if self.cluster:
            assert self._cluster is not None
            return list(self._cluster.get_primaries())
        return [None]

    # --- connections ----------------------------------------------------------------

    async def _maybe_refresh(self) -> None:
        if not self._refresh or self._cluster is None:
            return
        async with self._refresh_lock:
            if self._refresh:
                try:
                    await self._cluster.nodes_manager.initialize()
                except Exception as exc:
                    raise NotSent(f"cluster topology unavailable: {exc}") from exc
                self._refresh = False

    def _node_for(self, key: str) -> ClusterNode:
        assert self._cluster is not None
        node = self._cluster.get_node_from_key(key)
        if node is None:
            raise NotSent(f"no primary serves the slot of {key!r}")
        return node

    async def _acquire(
        self, node: ClusterNode | None
    ) -> tuple[Connection, Callable[[Connection], Awaitable[None]]]:
        """A connected connection and its release; every failure here is :class:`NotSent`."""
        assert self._slots is not None
        slots = self._slots
        await self._take_slot(slots)
        if not self.cluster:
            try:
                return await self._standalone_connection(), self._keep
            except BaseException:
                slots.release()
                raise
        assert node is not None
        try:
            conn = node.acquire_connection()
        except Exception as exc:
            slots.release()
            raise NotSent(f"no connection to {node.name}: {exc}") from exc
        try:
            async with asyncio.timeout(self.options.connect_timeout):  # as standalone
                await _ensure_ready(conn)
        except BaseException as exc:
            node.release(conn)
            slots.release()
            self._refresh = True
            if isinstance(exc, Exception):
                raise NotSent(f"cannot connect to {node.name}: {exc}") from exc
            raise

        async def release_cluster(c: Connection) -> None:
            node.release(c)
            slots.release()

        return conn, release_cluster

    async def _take_slot(self, slots: asyncio.Semaphore) -> None:
        """A permit for one connection, waiting up to ``pool_timeout`` in arrival order."""
        o = self.options
        try:
            if slots.locked():
                async with asyncio.timeout(o.pool_timeout):
                    await slots.acquire()
            else:
                await slots.acquire()  # free: returns at once, no timer needed
        except TimeoutError as exc:
            raise NotSent(
                f"connection pool exhausted: all {o.pool_size} connections stayed busy "
                f"for {o.pool_timeout} s (options pool_size, pool_timeout)",
                exhausted=True,
            ) from exc

    async def _standalone_connection(self) -> Connection:
        """A ready connection for a caller holding a permit: a kept one, else the pool's
        (which never waits: no more connections are out than permits)."""
        assert self._pool is not None
        while self._idle:
            conn = self._idle.pop()
            if await _still_ready(conn):
                if self._on_primary(conn):
                    return conn
                await _drop(conn)  # to the old primary: reconnected through the Sentinels
            await self._pool.release(conn)  # the pool's checkout reconnects it
        try:
            # The handshake's replies have no socket timeout (replies are bounded per
            # exchange): bound the whole connect, or a server that accepted the
            # connection and then went silent would hold the call forever.
            async with asyncio.timeout(self.options.connect_timeout):
                fresh: Connection = await self._pool.get_connection()  # type: ignore[no-untyped-call]
        except TimeoutError as exc:
            raise NotSent(f"no handshake within {self.options.connect_timeout} s") from exc
        except Exception as exc:
            raise NotSent(f"cannot connect: {exc}") from exc
        return fresh

    async def _keep(self, conn: Connection) -> None:
        """Release a standalone connection into :attr:`_idle` (a dropped one is
        reconnected by the pool when it is next taken; once closing, back to the pool),
        then its permit."""
        try:
            if self._standalone is not None:
                self._idle.append(conn)
            elif self._pool is not None:
                await self._pool.release(conn)
            else:
                await _drop(conn)
        finally:
            if self._slots is not None:
                self._slots.release()

    async def _connect(
        self, key: str | None, node: ClusterNode | None = None
    ) -> tuple[Connection, Callable[[Connection], Awaitable[None]]]:
        """:meth:`_acquire` for ``key``'s node (or ``node``), retried with backoff for up
        to ``reconnect_window`` while the server cannot be reached. An exhausted pool is
        not retried: it has already waited ``pool_timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.reconnect_window
        delay = 0.02
        while True:
            try:
                await self._maybe_refresh()
                target = node
                if self.cluster and key is not None:
                    target = self._node_for(key)
                return await self._acquire(target)
            except NotSent as exc:
                if exc.exhausted or loop.time() + delay > deadline:
                    raise
            self._refresh = self.cluster
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

    # --- running --------------------------------------------------------------------

    async def _exchange(
        self, conn: Connection, request: Request, *, buffered: bool = False
    ) -> list[Any]:
        """:func:`_pipeline` bounded by ``socket_timeout`` (a timeout means the commands may
        have run: callers treat it like a lost connection)."""
        limit = self.options.socket_timeout
        if limit is None:
            replies = await _pipeline(conn, request, buffered)
        else:
            try:
                async with asyncio.timeout(limit):
                    replies = await _pipeline(conn, request, buffered)
            except TimeoutError as exc:
                raise ReplyTimeout(f"no reply within {limit} s (socket_timeout)") from exc
        if self.sentinel is not None and any(type(r) is ReadOnlyError for r in replies):
            await self._demoted(conn)
        return replies

    async def _lost(self, conn: Connection, exc: BaseException, during: str = "") -> NoReturn:
        """After ``exc`` broke an exchange on ``conn`` once its commands were sent: drop
        the connection (its replies can no longer be matched to requests), look the
        cluster's topology up again before the next call, and raise :class:`Uncertain`
        (the commands may or may not have run); a cancellation is raised as it is."""
        await _drop(conn)
        self._refresh = self.cluster
        if isinstance(exc, Exception):
            raise Uncertain(f"connection lost{during}: {exc}") from exc
        raise exc

    def _wait_commands(self) -> list[tuple[EncodableT, ...]]:
        o = self.options
        cmds: list[tuple[EncodableT, ...]] = []
        if o.wait_replicas:
            cmds.append(("WAIT", o.wait_replicas, o.wait_timeout_ms))
        if o.wait_aof_local or o.wait_aof_replicas:
            cmds.append(("WAITAOF", o.wait_aof_local, o.wait_aof_replicas, o.wait_timeout_ms))
        return cmds

    async def write(self, script: Script, keys: Sequence[str], args: Sequence[EncodableT]) -> Any:
        """Run a writing script once. Raises :class:`NotSent`, :class:`Uncertain`,
        :class:`NotDurable` (WAIT/WAITAOF short) or the server's error reply."""
        request = packed([("EVALSHA", script.sha, len(keys), *keys, *args), *self._waits])
        loop = asyncio.get_running_loop()
        demoted_until = loop.time() + self.options.reconnect_window
        attempt = 0
        while attempt < 3:
            conn, release = await self._connect(keys[0])
            try:
                try:
                    replies = await self._exchange(conn, request)
                except BaseException as exc:
                    await self._lost(conn, exc, f" during {script.name}")
                first = replies[0]
                if isinstance(first, NoScriptError):
                    try:
                        await self._exchange(conn, packed([("SCRIPT", "LOAD", script.source)]))
                    except BaseException:
                        await _drop(conn)
                        raise
                    attempt += 1
                    continue
            finally:
                await release(conn)
            if isinstance(first, ReadOnlyError) and self.sentinel is not None:
                # not run: a demoted primary; the Sentinels name the new one meanwhile
                if loop.time() + 0.05 > demoted_until:
                    raise NotSent(f"the primary stayed read-only (a failover): {first}")
                await asyncio.sleep(0.05)
                continue
            attempt += 1
            if isinstance(first, (MovedError, AskError, TryAgainError, ClusterDownError)):
                self._refresh = True
                if attempt < 3:
                    await asyncio.sleep(0.05 * attempt)
                    continue
                raise NotSent(f"cluster redirection did not settle: {first}")
            if isinstance(first, Exception):
                raise first
            self._check_waits(first, replies[1:])
            return first
        raise NotSent(f"{script.name}: the server kept answering NOSCRIPT")

    async def write_many(self, calls: Sequence[Call]) -> list[Any]:
        """Run writing scripts pipelined, one exchange per node (grouped by each call's
        first key; WAIT / WAITAOF once at the end of each). Each result is the script's
        reply or the exception for that call: :class:`NotSent` (it did not run),
        :class:`Unencodable` (it did not run, nor did the rest of its node's pipeline),
        :class:`Uncertain` (its connection broke after sending), :class:`NotDurable`
        (it ran, unconfirmed) or the server's error reply."""
        results: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        for attempt in range(2):  # what did not run (a redirection, no connection): once more
            with contextlib.suppress(NotSent):  # _connect retries the refresh
                await self._maybe_refresh()
            groups: dict[Any, list[int]] = {}
            for i in pending:
                try:
                    node = self._node_for(calls[i][1][0]) if self.cluster else None
                except NotSent as exc:
                    results[i] = exc
                    continue
                groups.setdefault(node, []).append(i)
            outcome = await asyncio.gather(
                *(self._write_on_node(node, [calls[i] for i in ix]) for node, ix in groups.items()),
                return_exceptions=True,
            )
            for idx, replies in zip(groups.values(), outcome, strict=True):
                if isinstance(replies, BaseException):
                    if not isinstance(replies, Exception):
                        raise replies
                    replies = [replies] * len(idx)
                for i, reply in zip(idx, replies, strict=True):
                    results[i] = reply
            pending = [i for i in pending if isinstance(results[i], NotSent)]
            if not pending or attempt == 1 or any(results[i].exhausted for i in pending):
                break
            await asyncio.sleep(0.05)
        return results

    async def _write_on_node(self, node: ClusterNode | None, calls: Sequence[Call]) -> list[Any]:
        """One pipeline of writing scripts on ``node``; see :meth:`write_many`."""
        waits = self._waits
        cmds = [_command(c) for c in calls]
        request = packed([*cmds, *waits])
        conn, release = await self._connect(None, node)
        try:
            try:
                replies = await self._exchange(conn, request)
                wait_replies = replies[len(cmds) :]
                missing = [i for i, r in enumerate(replies[: len(cmds)]) if _no_script(r)]
                if missing:  # NOSCRIPT: those did not run; load them and send them again
                    loads: list[tuple[EncodableT, ...]] = []
                    for i in missing:
                        script = calls[i][0]
                        assert script is not None
                        loads.append(("SCRIPT", "LOAD", script.source))
                    again = await self._exchange(
                        conn, packed([*loads, *(cmds[i] for i in missing), *waits])
                    )
                    rerun = again[len(loads) : len(loads) + len(missing)]
                    for i, reply in zip(missing, rerun, strict=True):
                        replies[i] = reply
                    wait_replies = again[len(loads) + len(missing) :]
            except BaseException as exc:
                await self._lost(conn, exc, " during a write pipeline")
        finally:
            await release(conn)
        out: list[Any] = []
        for reply in replies[: len(cmds)]:
            if isinstance(reply, (MovedError, AskError, TryAgainError, ClusterDownError)):
                self._refresh = True
                out.append(NotSent(f"cluster redirection: {reply}"))
            elif isinstance(reply, ReadOnlyError) and self.sentinel is not None:
                out.append(NotSent(f"a demoted primary (a failover) refused it: {reply}"))
            elif isinstance(reply, Exception):
                out.append(reply)
            else:
                try:
                    self._check_waits(reply, wait_replies)
                except NotDurable as exc:
                    out.append(exc)
                else:
                    out.append(reply)
        return out

    def _check_waits(self, reply: Any, wait_replies: Sequence[Any]) -> None:
        o = self.options
        i = 0
        if o.wait_replicas:
            got = wait_replies[i]
            i += 1
            if isinstance(got, Exception) or int(got) < o.wait_replicas:
                raise NotDurable(
                    reply, f"WAIT: {got} of {o.wait_replicas} replicas confirmed in time"
                )
        if o.wait_aof_local or o.wait_aof_replicas:
            got = wait_replies[i]
            if isinstance(got, Exception):
                raise NotDurable(reply, f"WAITAOF failed: {got}")
            local, replicas = int(got[0]), int(got[1])
            if local < o.wait_aof_local or replicas < o.wait_aof_replicas:
                raise NotDurable(
                    reply,
                    f"WAITAOF: fsynced locally {local}/{o.wait_aof_local}, on replicas "
                    f"{replicas}/{o.wait_aof_replicas} in time",
                )

    async def read(self, script: Script, keys: Sequence[str], args: Sequence[EncodableT]) -> Any:
        """Run a read-only script (sent again once after a connection failure)."""
        if self.cluster:
            reply = (await self.many([(script, keys, args)]))[0]
        else:  # one node: no grouping and no task per node, the hot path of every read
            reply = (await self._on_node_retry(None, [(script, keys, args)]))[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def transaction(
        self, routing_key: str, commands: Sequence[tuple[EncodableT, ...]]
    ) -> list[Any]:
        """Plain read ``commands`` on keys of ``routing_key``'s hash slot as one
        ``MULTI``/``EXEC``, sent in one write: the server runs them back to back with
        nothing in between, so their replies are one atomic snapshot, without the cost of
        entering Lua. Returns ``EXEC``'s replies; an error reply is raised. Sent once more
        after a lost connection or a cluster redirection (they only read)."""
        request = packed([_MULTI, *commands, _EXEC])
        for attempt in range(2):
            try:
                replies = await self._transaction_once(routing_key, request)
            except (Uncertain, NotSent):
                if attempt:
                    raise
                continue
            result = replies[-1]
            if type(result) is list:
                for reply in result:
                    if isinstance(reply, Exception):
                        raise reply
                return result
            # EXECABORT: a queued command was refused, which one says why
            refused = [r for r in replies[1:-1] if isinstance(r, Exception)]
            if any(isinstance(r, _REDIRECTED) for r in refused):
                self._refresh = True
                if not attempt:
                    continue
                raise NotSent(f"cluster redirection: {refused[0]}")
            if refused:
                raise refused[0]
            raise result if isinstance(result, Exception) else RuntimeError(f"EXEC: {result!r}")
        raise AssertionError("unreachable")  # pragma: no cover

    async def _transaction_once(self, routing_key: str, request: Request) -> list[Any]:
        conn, release = await self._connect(routing_key)
        try:
            try:
                return await self._exchange(conn, request, buffered=True)
            except BaseException as exc:
                await self._lost(conn, exc)
        finally:
            await release(conn)

    async def command(self, routing_key: str, *args: EncodableT) -> Any:
        """One idempotent command routed by ``routing_key``."""
        reply = (await self.many([(None, [routing_key], args)]))[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def many(self, calls: Sequence[Call]) -> list[Any]:
        """Run read-only scripts and idempotent commands, pipelined per node; each result
        is a reply or the exception for that call. A lost connection is retried once."""
        results: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        for attempt in range(2):
            with contextlib.suppress(NotSent):  # _connect retries the refresh
                await self._maybe_refresh()
            groups: dict[Any, list[int]] = {}
            for i in pending:
                key = calls[i][1][0] if calls[i][1] else None
                node = self._node_for(key) if (self.cluster and key is not None) else None
                if self.cluster and node is None:
                    assert self._cluster is not None
                    node = self._cluster.get_default_node()
                groups.setdefault(node, []).append(i)
            outcome = await asyncio.gather(
                *(self._on_node(node, [calls[i] for i in idx]) for node, idx in groups.items()),
                return_exceptions=True,
            )
            retry: list[int] = []
            for (_node, idx), replies in zip(groups.items(), outcome, strict=True):
                if isinstance(replies, BaseException):
                    if isinstance(replies, (Uncertain, NotSent)) and attempt == 0:
                        retry.extend(idx)
                        continue
                    if not isinstance(replies, Exception):
                        raise replies
                    for i in idx:
                        results[i] = replies
                    continue
                for i, reply in zip(idx, replies, strict=True):
                    if isinstance(reply, (MovedError, AskError, TryAgainError, ClusterDownError)):
                        self._refresh = True
                        if attempt == 0:
                            retry.append(i)
                            continue
                    if isinstance(reply, ReadOnlyError) and attempt == 0 and self.sentinel:
                        retry.append(i)  # a demoted primary: on a connection to the new one
                        continue
                    results[i] = reply
            if not retry:
                break
            pending = retry
        return results

    async def _on_node(self, node: ClusterNode | None, calls: Sequence[Call]) -> list[Any]:
        cmds = [_command(c) for c in calls]
        request = packed(cmds)
        conn, release = await self._connect(None, node)
        try:
            try:
                replies = await self._exchange(conn, request)
                missing = [
                    i for i, r in enumerate(replies) if isinstance(r, NoScriptError) and calls[i][0]
                ]
                if missing:
                    loads: list[tuple[EncodableT, ...]] = []
                    for i in missing:
                        script = calls[i][0]
                        assert script is not None
                        loads.append(("SCRIPT", "LOAD", script.source))
                    again = await self._exchange(
                        conn, packed([*loads, *(cmds[i] for i in missing)])
                    )
                    for i, reply in zip(missing, again[len(loads) :], strict=True):
                        replies[i] = reply
            except BaseException as exc:
                await self._lost(conn, exc)
            return replies
        finally:
            await release(conn)

    async def time_us(self) -> int:
        """The server's clock in microseconds (``TIME`` on the default node)."""
        node = None
        if self.cluster:
            assert self._cluster is not None
            node = self._cluster.get_default_node()
        reply = (await self._on_node_retry(node, [(None, [], ("TIME",))]))[0]
        if isinstance(reply, Exception):
            raise reply
        return int(reply[0]) * 1_000_000 + int(reply[1])

    async def _on_node_retry(self, node: ClusterNode | None, calls: Sequence[Call]) -> list[Any]:
        try:
            return await self._on_node(node, calls)
        except (Uncertain, NotSent):
            await self._maybe_refresh()
            return await self._on_node(node, calls)

    async def scan(self, pattern: str, count: int = 1000) -> list[bytes]:
        """Every key matching ``pattern`` on every primary (administration only)."""
        found: list[bytes] = []
        for node in await self._primaries():
            cursor: Any = 0
            while True:
                replies = await self._on_node_retry(
                    node, [(None, [], ("SCAN", cursor, "MATCH", pattern, "COUNT", count))]
                )
                reply = replies[0]
                if isinstance(reply, Exception):
                    raise reply
                cursor, keys = reply
                found.extend(keys)
                if int(cursor) == 0:
                    break
        return found

    # --- push: the listener's own connections ---------------------------------------

    async def refresh_topology(self) -> None:
        """Read the cluster's slot map again (a listener reconnecting after a failover or a
        moved slot); nothing to do on one server."""
        if self._cluster is not None:
            self._refresh = True
            await self._maybe_refresh()

    def servers(self) -> list[str]:
        """The names of the servers writes go to: every primary of a cluster, or the one
        server (named ``server``; behind Sentinel, whichever is primary when connecting)."""
        if self._cluster is None:
            return [STANDALONE]
        return [node.name for node in self._cluster.get_primaries()]

    def server_of(self, key: str) -> str:
        """The name (:meth:`servers`) of the server serving ``key``'s slot."""
        if self._cluster is None:
            return STANDALONE
        return self._node_for(key).name

    def new_connection(self, server: str, client_name: str) -> AbstractConnection:
        """A connection to ``server`` (:meth:`servers`) outside the pool, not yet connected,
        with this client's settings and credentials: the caller owns and closes it."""
        if self._cluster is None:
            if self._pool is None:
                raise NotSent("the client is closed")
            kind, kwargs = self._pool.connection_class, self._pool.connection_kwargs
        else:
            node = self._cluster.get_node(node_name=server)
            if node is None:
                raise NotSent(f"no cluster node {server!r}")
            kind, kwargs = node.connection_class, node.connection_kwargs
        return kind(**{**kwargs, "client_name": client_name})

    async def still_primary(self, conn: AbstractConnection) -> bool:
        """Whether ``conn`` (a listener's, from :meth:`new_connection`) still goes to the
        primary: behind Sentinel, to the address the Sentinels name now (a coordinated
        failover demotes the old primary without closing its connections, and a demoted
        server answers ``PING`` and ``SSUBSCRIBE`` but never hears the new primary's
        publishes). Always True otherwise, and when no Sentinel answers (the listener's
        ``PING`` decides then)."""
        pool = self._pool
        if self.sentinel is None or not isinstance(pool, SentinelConnectionPool):
            return True
        try:
            address = await pool.get_master_address()  # type: ignore[no-untyped-call]
        except Exception:
            return True
        return (getattr(conn, "host", None), getattr(conn, "port", None)) == tuple(address)

    async def on_primaries(self, *args: EncodableT) -> list[Any]:
        """One command on every primary (administration and tests)."""
        out = []
        for node in await self._primaries():
            out.append((await self._on_node_retry(node, [(None, [], args)]))[0])
        return out


_MULTI: tuple[EncodableT, ...] = ("MULTI",)
_EXEC: tuple[EncodableT, ...] = ("EXEC",)
_REDIRECTED = (MovedError, AskError, TryAgainError, ClusterDownError)


def _no_script(reply: Any) -> bool:
    return isinstance(reply, NoScriptError)


def _command(call: Call) -> tuple[EncodableT, ...]:
    script, keys, args = call
    if script is None:
        return tuple(args)
    return ("EVALSHA", script.sha, len(keys), *keys, *args)


async def _still_ready(conn: Connection) -> bool:
    """Whether a held connection can take a command now: still connected, nothing unread
    and no end of stream (the server closed it meanwhile). No I/O: it reads buffers."""
    if not conn.is_connected:
        return False
    try:
        return not await conn.can_read()
    except Exception:
        return False


async def _ensure_ready(conn: Connection) -> None:
    """Connect, or reconnect a connection whose socket the server closed meanwhile."""
    if not conn.is_connected:
        await conn.connect()  # type: ignore[no-untyped-call]
        return
    try:
        stale = await conn.can_read()
    except Exception:
        stale = True
    if stale:
        await conn.disconnect()
        await conn.connect()  # type: ignore[no-untyped-call]


def packed(cmds: Sequence[Sequence[EncodableT]]) -> Request:
    """``cmds`` packed for :func:`_pipeline`, before any connection is taken.

    Raises:
        Unencodable: an argument has no encoding; nothing is sent.
    """
    try:
        return _pack(cmds), len(cmds)
    except (UnicodeEncodeError, DataError) as exc:
        raise Unencodable(f"a command argument cannot be sent: {exc}") from None


def _pack(cmds: Sequence[Sequence[EncodableT]]) -> bytes:
    """The RESP encoding of ``cmds``, as redis-py's encoder makes it (UTF-8 text, ``repr``
    of numbers, bytes as they are; a bool refused). Packing is most of the client-side
    time of a short script call and of a heartbeat batch, so it goes through hiredis's C
    ``pack_command`` when installed (the ``hiredis`` extra: about 3.5x less CPU per
    command than :func:`_pack_python`), and falls back to that for what hiredis refuses
    (a bool, another type), which then encodes or refuses it as redis-py would."""
    if _pack_command is not None:
        try:
            return b"".join([_pack_command(c if type(c) is tuple else tuple(c)) for c in cmds])
        except TypeError:
            pass
    return _pack_python(cmds)


def _pack_python(cmds: Sequence[Sequence[EncodableT]]) -> bytes:
    """:func:`_pack` in Python, a fraction of redis-py's own encoder's cost."""
    out: list[bytes] = []
    add = out.append
    for cmd in cmds:
        add(b"*%d\r\n" % len(cmd))
        for arg in cmd:
            kind = type(arg)
            if kind is str:
                raw = arg.encode("utf-8")  # type: ignore[union-attr]
            elif kind is bytes:
                raw = arg
            elif kind is int or kind is float:
                raw = repr(arg).encode()
            else:
                raw = _encode_other(arg)
            add(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(out)


def _encode_other(arg: object) -> bytes:
    """A subclass of str, bytes, int or float as :func:`_pack_python` encodes it (a bool
    refused)."""
    if isinstance(arg, str):
        return arg.encode("utf-8")
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return bytes(arg)
    if isinstance(arg, bool) or not isinstance(arg, (int, float)):
        raise DataError(
            f"Invalid input of type: {type(arg).__name__!r}. "
            "Convert to a bytes, string, int or float first."
        )
    return repr(arg).encode()


async def _pipeline(conn: Connection, request: Request, buffered: bool = False) -> list[Any]:
    """Send every command of ``request`` in one write, read every reply; error replies
    are returned.

    ``buffered``: a reply already in the parser's buffer is taken from the hiredis reader
    itself (``read_response`` costs a few µs per reply around a parse of far less; most
    of a ``MULTI``/``EXEC``'s replies arrive with the first)."""
    data, count = request
    await conn.send_packed_command(data, check_health=False)
    reader = _hiredis_reader(conn) if buffered else None
    replies: list[Any] = []
    for _ in range(count):
        if reader is not None:
            reply = reader.gets()
            if reply is not _NOT_ENOUGH_DATA:
                if isinstance(reply, RedisConnectionError):
                    raise reply
                replies.append(reply)
                continue
        try:
            replies.append(await conn.read_response())
        except ResponseError as exc:
            replies.append(exc)
    return replies


def _hiredis_reader(conn: Connection) -> Any:
    """The connection's hiredis reader, or None (another parser, another redis-py)."""
    parser = getattr(conn, "_parser", None)
    if _NOT_ENOUGH_DATA is None or not isinstance(parser, _AsyncHiredisParser):
        return None
    return getattr(parser, "_reader", None)


class _PrimaryConnection(SentinelManagedConnection):
    """A connection to the primary the Sentinels name. redis-py's turns a ``READONLY``
    reply into a connection error (after dropping the connection), which would make a
    write that did not run look like one that may have; here the reply stays the error
    reply it is, and the client drops the connection itself (:meth:`RedisClient._demoted`)."""

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        return await Connection.read_response(self, *args, **kwargs)


class ReplyTimeout(Exception):
    """No complete reply within ``socket_timeout``."""


async def _drop(conn: Connection) -> None:
    with contextlib.suppress(Exception):
        await conn.disconnect(nowait=True)


__all__ = [
    "STANDALONE",
    "Call",
    "ClientOptions",
    "NotDurable",
    "NotSent",
    "RedisClient",
    "Request",
    "Script",
    "Uncertain",
    "Unencodable",
    "packed",
    "refused_before_run",
]
