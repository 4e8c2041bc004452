"""The connection pool and the two ways a store talks to PostgreSQL: reads and writes.

- Reads are retried once on a fresh connection when the connection breaks.
- Writes carry a writer nonce that the rows they write record. When the connection
  breaks after the request may have been sent, the outcome is unknown; the write is
  then *reconciled*: on a fresh connection, wait until the server backend that ran the
  request has exited (so its transaction is settled and cannot commit later; an orphan
  still running after a grace period is terminated), then read the rows back. The nonce
  found means the write landed and its result is returned; a state that proves it did
  not land lets the write be sent again; anything else raises
  :class:`~agentstores.errors.UnknownOutcomeError`. Nothing is guessed. Behind pgbouncer
  the backend cannot be identified, so only a found nonce counts.
- Waiting for a pooled connection is bounded by ``acquire_timeout``; running out raises
  :class:`~agentstores.errors.BackendUnavailableError` saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentstores.errors import AgentStoresError, BackendUnavailableError, UnknownOutcomeError

from . import schema_check
from .errors import is_connection_loss, translate
from .urls import Config

log = logging.getLogger(__name__)

T = TypeVar("T")
Conn = Any
"""An asyncpg connection (or pool proxy); asyncpg ships no type information."""

OPEN_UNANSWERED_WINDOW = 3.0
"""Seconds ``open`` keeps retrying while nothing answers at the address (a refused or
failed TCP connect): long enough for a restart's closed port, short enough that a wrong
host or port fails fast. A server that answers but is not ready (starting up, shutting
down, full) is waited for up to ``acquire_timeout``."""

PUSH_SETTING = "agentstores.push"
"""The session setting the server-side functions read: ``on``, each write they make
publishes a wake-up (``sql/functions/wake.sql``)."""

ORPHAN_GRACE = 1.0
"""Seconds an orphaned backend may keep running before it is terminated."""


@dataclass(frozen=True, slots=True)
class WriteOutcome(Generic[T]):
    """What reading back a write's rows proved."""

    kind: str
    value: T | None = None

    @classmethod
    def landed(cls, value: T) -> WriteOutcome[T]:
        return cls("landed", value)

    @classmethod
    def not_landed(cls) -> WriteOutcome[T]:
        return cls("not_landed")

    @classmethod
    def unknown(cls) -> WriteOutcome[T]:
        return cls("unknown")


Reconcile = Callable[[Conn], Awaitable[WriteOutcome[T]]]


class Database:
    """One asyncpg pool, the schema it uses, and the read/write disciplines above."""

    def __init__(self, config: Config, schema: str) -> None:
        self.config = config
        self.schema = schema
        self.pool: Any = None
        self._held: list[Conn] = []
        """Pooled connections this database took and keeps between calls, each left clean
        by a call that completed (no transaction open, not closed). Taking one back is a
        list pop; asyncpg's release runs in a task of its own (``asyncio.shield``) and its
        acquire through a queue, about a fifth of a short call's time. The pool still
        counts them as in use, so its ``pool_max_size`` bounds them too."""
        self._permits: asyncio.Semaphore | None = None
        """One permit per pooled connection, taken before a connection (kept or the
        pool's) and given back after it: callers wait here, first come first served, so
        a connection a call leaves goes to the caller that waited longest. (Waiting on the
        pool's queue instead, a caller could watch later arrivals take the kept
        connections: the tail of a busy pool's latency, and starvation until
        ``acquire_timeout``.) The pool itself then never makes a caller wait."""
        self.backend_starts: dict[int, Any] = {}
        """Server pid -> that backend's start time, recorded when each connection opens:
        a pid alone may be reused by a later backend once the first has exited."""

    # --- lifecycle ---------------------------------------------------------------

    async def open(self) -> None:
        import asyncpg

        self._permits = asyncio.Semaphore(self.config.pool_max_size)
        options: dict[str, Any] = {
            "min_size": self.config.pool_min_size,
            "max_size": self.config.pool_max_size,
            "command_timeout": self.config.command_timeout,
            "reset": keep_session,
            "timeout": self.config.acquire_timeout,  # connecting one connection
        }
        if self.config.pgbouncer:
            options["statement_cache_size"] = 0
        else:
            options["server_settings"] = {"application_name": "agentstores"}
            if self.config.pushing:
                # the functions publish a wake-up only for a session that asks for it
                options["server_settings"][PUSH_SETTING] = "on"
            options["init"] = self._identify
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.acquire_timeout
        unanswered = loop.time() + min(OPEN_UNANSWERED_WINDOW, self.config.acquire_timeout)
        delay = 0.05
        while True:
            try:
                self.pool = await asyncpg.create_pool(self.config.dsn, **options)
                break
            except Exception as exc:
                limit = unanswered if _nothing_answers(exc) else deadline
                if not _server_away(exc) or loop.time() + delay >= limit:
                    raise self._unreachable(exc) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
        try:
            async with self.connection() as conn:
                await schema_check.check(conn, self.schema)
        except BaseException as exc:
            await self.close()
            if isinstance(exc, Exception) and is_connection_loss(exc):
                # the connection broke during the check: typed, as a failed connect is
                raise self._unreachable(exc) from exc
            raise

    async def _identify(self, conn: Conn) -> None:
        """Note when the connection's server process started, so a write whose reply is
        lost can wait for that process to end. A pooler may hand the client an id of its
        own in the handshake (PgBouncer in session mode does): that id names no server
        process, so nothing is noted and only a write's own trace proves it landed."""
        r = await conn.fetchrow(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        )
        if r is not None and r["pid"] == conn.get_server_pid():
            self.backend_starts[r["pid"]] = r["backend_start"]

    async def close(self) -> None:
        pool, self.pool = self.pool, None
        if pool is None:
            return
        held, self._held = self._held, []
        for conn in held:
            with contextlib.suppress(Exception):
                await pool.release(conn)
        try:
            await asyncio.wait_for(pool.close(), timeout=10)
        except (TimeoutError, Exception):
            pool.terminate()

    # --- connections ---------------------------------------------------------------

    def _unreachable(self, exc: BaseException) -> AgentStoresError:
        if isinstance(exc, AgentStoresError):
            return exc
        translated = translate(exc)
        if isinstance(translated, BackendUnavailableError):
            return translated
        return BackendUnavailableError(f"cannot connect to PostgreSQL: {exc}")

    @contextlib.asynccontextmanager
    async def connection(self, wait_at_most: float | None = None) -> AsyncIterator[Conn]:
        """A pooled connection, waiting at most ``acquire_timeout`` for one: for a busy
        pool to free one, or for a restarting server to accept connections again."""
        conn = await self._acquire(wait_at_most)
        clean = False
        try:
            yield conn
            clean = True
        finally:
            await self._release(conn, clean=clean)

    async def _acquire(self, wait_at_most: float | None = None) -> Conn:
        pool, permits = self.pool, self._permits
        if pool is None or permits is None:
            raise BackendUnavailableError("the PostgreSQL stores are not open (use async with)")
        wait = self.config.acquire_timeout if wait_at_most is None else max(wait_at_most, 0.001)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        try:
            if permits.locked():
                async with asyncio.timeout(wait):
                    await permits.acquire()
            else:
                await permits.acquire()  # free: returns at once, no timer needed
        except TimeoutError as exc:
            most = pool.get_max_size()
            raise BackendUnavailableError(
                f"PostgreSQL pool exhausted: all {most} pooled connections stayed busy for "
                f"{wait:g}s; raise pool_max_size or acquire_timeout, or lower the concurrency",
                pool_max_size=most,
                waited=wait,
            ) from exc
        try:
            return await self._connection(pool, deadline, wait)
        except BaseException:
            permits.release()
            raise

    async def _connection(self, pool: Any, deadline: float, wait: float) -> Conn:
        """A connection for a caller holding a permit: a kept one, else the pool's (idle,
        or opened now: no more are out than permits, so the pool's queue never makes it
        wait for another caller)."""
        held = self._held
        while held:
            conn = held.pop()
            if _open_and_idle(conn):
                return conn
            with contextlib.suppress(Exception):
                await pool.release(conn)  # the pool replaces a closed one
        loop = asyncio.get_running_loop()
        delay = 0.05
        while True:
            try:
                if pool.get_idle_size() > 0:
                    # An idle connection sits in the pool's queue: taking one cannot
                    # wait on the queue, and (re)connecting is bounded by the connect
                    # timeout, so skip arming a timer on the hot path.
                    return await pool.acquire()
                # asyncio.timeout, not acquire(timeout=): no extra task per call.
                async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                    return await pool.acquire()
            except TimeoutError as exc:
                raise BackendUnavailableError(
                    f"PostgreSQL pool exhausted: no connection to PostgreSQL could be opened "
                    f"within {wait:g}s",
                    pool_max_size=pool.get_max_size(),
                    waited=wait,
                ) from exc
            except Exception as exc:
                # A server restarting refuses connections for a moment: wait it out
                # within the same bound as a busy pool.
                if not _server_away(exc) or loop.time() + delay >= deadline:
                    raise self._unreachable(exc) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)

    async def _release(self, conn: Conn, *, clean: bool = False) -> None:
        """Give ``conn`` back, then its permit: kept in :attr:`_held` when the call using
        it completed (``clean``) and left no transaction open, else to the pool, which
        resets it (or waits out a cancelled query, or replaces a broken connection)."""
        pool = self.pool
        try:
            if pool is None:
                return
            if clean and _open_and_idle(conn):
                self._held.append(conn)
                return
            with contextlib.suppress(Exception):
                await pool.release(conn)
        finally:
            if self._permits is not None:
                self._permits.release()

    # --- reads and writes ------------------------------------------------------------

    async def read(self, run: Callable[[Conn], Awaitable[T]]) -> T:
        """Run a read; a connection lost midway is retried once on a fresh one."""
        for attempt in range(2):
            conn = await self._acquire()
            clean = False
            try:
                result = await run(conn)
                clean = True
                return result
            except Exception as exc:
                if attempt == 0 and _retryable_read(exc):
                    continue
                raise
            finally:
                await self._release(conn, clean=clean)
        raise AssertionError("unreachable")

    async def write(
        self,
        run: Callable[[Conn], Awaitable[T]],
        reconcile: Reconcile[T] | None,
        *,
        what: str = "write",
    ) -> T:
        """Run a write; a connection lost after sending is reconciled (see module doc)."""
        for _attempt in range(3):
            conn = await self._acquire()
            pid = conn.get_server_pid()
            backend = (pid, self.backend_starts.get(pid))
            clean = False
            try:
                result = await run(conn)
                clean = True
                return result
            except Exception as exc:
                if not is_connection_loss(exc):
                    if _never_sent(exc):
                        lost = None
                    else:
                        raise
                else:
                    lost = exc
            finally:
                await self._release(conn, clean=clean)
            if lost is None:
                continue
            verdict = await self._reconcile(reconcile, backend, lost, what)
            if verdict.kind == "landed":
                return verdict.value  # type: ignore[return-value]
            log.info("%s did not land before its connection broke; sending it again", what)
        raise UnknownOutcomeError(
            f"{what}: the connection kept breaking; the outcome of the last attempt is unknown"
        )

    async def _reconcile(
        self,
        reconcile: Reconcile[T] | None,
        backend: tuple[int, Any],
        lost: BaseException,
        what: str,
    ) -> WriteOutcome[T]:
        """``landed`` or ``not_landed`` (proven), else raise UnknownOutcomeError."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.reconcile_timeout

        def unknown(reason: str) -> UnknownOutcomeError:
            return UnknownOutcomeError(
                f"{what}: the connection to PostgreSQL broke after the request was sent "
                f"({type(lost).__name__}: {lost}); {reason}",
                reason=reason,
            )

        if reconcile is None:
            raise unknown("this call cannot be checked afterwards") from lost
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise unknown(
                    f"PostgreSQL stayed unreachable for {self.config.reconcile_timeout:g}s"
                ) from lost
            try:
                async with self.connection(wait_at_most=remaining) as conn:
                    settled = False
                    if not self.config.pgbouncer and backend[1] is not None:
                        settled = await self._await_gone(conn, backend, deadline)
                    verdict = await reconcile(conn)
                break
            except UnknownOutcomeError:
                raise
            except Exception as exc:
                if not (
                    isinstance(exc, BackendUnavailableError)
                    or is_connection_loss(exc)
                    or _never_sent(exc)
                ):
                    raise
                await asyncio.sleep(min(0.2, max(deadline - loop.time(), 0)))
        if verdict.kind == "landed":
            return verdict
        if verdict.kind == "not_landed" and settled:
            return verdict
        if not settled and not self.config.pgbouncer and backend[1] is not None:
            raise unknown("the server process that ran it did not exit in time") from lost
        raise unknown("its rows carry no trace of it and nothing proves it did not land") from lost

    async def _await_gone(self, conn: Conn, backend: tuple[int, Any], deadline: float) -> bool:
        """Wait until the backend ``(pid, start)`` has exited (its transaction settled)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        terminated = False
        pid, start = backend
        while True:
            alive = await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 "
                "AND backend_start = $2 AND pid <> pg_backend_pid())",
                pid,
                start,
            )
            if not alive:
                return True
            if loop.time() >= deadline:
                return False
            if not terminated and loop.time() - started >= ORPHAN_GRACE:
                terminated = True
                with contextlib.suppress(asyncpg_errors()):
                    await conn.fetchval(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE pid = $1 AND backend_start = $2 AND pid <> pg_backend_pid()",
                        pid,
                        start,
                    )
            await asyncio.sleep(0.05)


def _open_and_idle(conn: Conn) -> bool:
    """Whether a held connection can run the next call: open, no transaction, and still
    ours (a connection that broke while held was already given back by asyncpg, and its
    proxy then refuses every method)."""
    try:
        return not conn.is_closed() and not conn.is_in_transaction()
    except Exception:
        return False


async def keep_session(conn: Conn) -> None:
    """The pool's reset on release. asyncpg's default sends ``RESET ALL; CLOSE ALL;
    UNLISTEN *; ...`` after every call, a second round trip per call. The adapter keeps
    no session state (no SET, cursors, LISTEN or advisory locks), and an open
    transaction is still rolled back by asyncpg before this runs, so nothing is reset."""
    return None


def _nothing_answers(exc: BaseException) -> bool:
    """No PostgreSQL server answered at all: the TCP connect was refused or failed."""
    return isinstance(exc, OSError) and getattr(exc, "sqlstate", None) is None


def _server_away(exc: BaseException) -> bool:
    """The server refused or dropped a new connection in a way that passes: it is
    starting, shutting down, restarting, or full."""
    if isinstance(exc, OSError):
        return True
    code = getattr(exc, "sqlstate", None)
    if code in {"57P01", "57P02", "57P03", "53300"} or (
        isinstance(code, str) and code.startswith("08")
    ):
        return True
    return is_connection_loss(exc)


def asyncpg_errors() -> type[Exception]:
    import asyncpg

    error: type[Exception] = asyncpg.PostgresError
    return error


def _never_sent(exc: BaseException) -> bool:
    """asyncpg refused before sending anything: the connection is already known to be
    closed, or the server's fatal error on an idle connection (a terminated backend) was
    read but the close not yet (asyncpg then refuses the next operation)."""
    import asyncpg

    if isinstance(exc, asyncpg.InternalClientError):
        return "another operation" in str(exc)
    return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)


def _retryable_read(exc: BaseException) -> bool:
    return is_connection_loss(exc) or _never_sent(exc)
