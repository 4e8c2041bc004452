"""One pub/sub connection to one server, outside the pool: the push listener's link.

Commands (``SSUBSCRIBE``, ``SUNSUBSCRIBE``, ``PING``) are sent from any task; one reader
task reads everything the server sends, in order: each confirmation ends the wait of the
command it answers, each message on a shard channel goes to ``on_message``. Anything
else (an error reply such as ``MOVED``, a ``sunsubscribe`` nobody asked for: the server
dropping the subscriptions of a slot that moved, an unexpected reply, the connection
closing) fails the link: every waiting command fails and ``on_lost`` is called once.
Works on the oldest redis-py the adapter admits (no sharded pub/sub of its own there).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError

from .client import packed

_CONFIRMS = {b"SSUBSCRIBE": b"ssubscribe", b"SUNSUBSCRIBE": b"sunsubscribe", b"PING": b"pong"}
"""The first element of the reply that confirms each command (``PING`` answers
``["pong", ""]`` while subscribed, ``+PONG`` when not: both count)."""


class LinkLost(RedisConnectionError):
    """The link failed: its connection is gone or the server said something it must not."""


class Link:
    """One pub/sub connection; :meth:`open` it, :meth:`call` commands, :meth:`close` it."""

    def __init__(
        self,
        conn: AbstractConnection,
        on_message: Callable[[bytes], None],
        on_lost: Callable[[Link], None],
    ) -> None:
        self.conn = conn
        self._on_message = on_message
        self._on_lost = on_lost
        self._waiting: deque[tuple[bytes, bytes | None, asyncio.Future[None]]] = deque()
        self._reader: asyncio.Task[None] | None = None
        self.failed: BaseException | None = None
        """Why the link failed (None while it works)."""

    async def open(self, within: float) -> None:
        """Connect (within ``within`` seconds) and start reading."""
        async with asyncio.timeout(within):
            await self.conn.connect()  # type: ignore[no-untyped-call]
        self._reader = asyncio.create_task(self._read(), name="agentstores-redis-push-link")

    async def call(self, commands: Sequence[tuple[bytes, bytes | None]], within: float) -> None:
        """Send each ``(command, channel or None)`` in one write and wait (at most
        ``within`` seconds) until the server confirmed them all; :class:`LinkLost` or
        ``TimeoutError`` otherwise (then the link is no longer to be trusted)."""
        if self.failed is not None:
            raise LinkLost(f"the push connection failed: {self.failed}")
        if not commands:
            return
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[None]] = []
        for verb, channel in commands:
            future: asyncio.Future[None] = loop.create_future()
            self._waiting.append((_CONFIRMS[verb], channel, future))
            futures.append(future)
        request = packed([(verb,) if ch is None else (verb, ch) for verb, ch in commands])
        try:
            await self.conn.send_packed_command(request[0], check_health=False)
            async with asyncio.timeout(within):
                await asyncio.gather(*futures)
        except BaseException as exc:
            self._fail(exc)
            raise

    async def ping(self, within: float) -> bool:
        """Whether the server answers a ``PING`` on this connection within ``within`` s."""
        try:
            await self.call([(b"PING", None)], within)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        """Stop reading and close the connection (idempotent; ``on_lost`` is not called)."""
        if self.failed is None:
            self.failed = LinkLost("closed")
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        self._fail_waiting(LinkLost("closed"))
        with contextlib.suppress(Exception):
            await self.conn.disconnect(nowait=True)

    # --- reading -----------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                self._take(await self.conn.read_response())
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(exc)

    def _take(self, reply: Any) -> None:
        kind = reply[0] if isinstance(reply, list) and reply else reply
        if kind == b"smessage" and len(reply) == 3:
            self._on_message(reply[1])
            return
        if kind == b"PONG":
            kind = b"pong"
        channel = reply[1] if isinstance(reply, list) and len(reply) > 1 else None
        if self._waiting:
            expected, wanted, future = self._waiting[0]
            if expected == kind and (wanted is None or wanted == channel):
                self._waiting.popleft()
                if not future.done():
                    future.set_result(None)
                return
        if kind == b"sunsubscribe":
            raise LinkLost("the server dropped a subscription (its slot moved)")
        raise LinkLost(f"unexpected reply on the push connection: {str(kind)[:40]}")

    def _fail(self, exc: BaseException) -> None:
        """The link is broken: fail every wait and tell the owner (once)."""
        if self.failed is not None:
            return
        self.failed = exc
        self._fail_waiting(LinkLost(f"the push connection failed: {exc}"))
        self._on_lost(self)

    def _fail_waiting(self, exc: BaseException) -> None:
        waiting, self._waiting = self._waiting, deque()
        for _kind, _channel, future in waiting:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved: a wait already gone never warns


__all__ = ["Link", "LinkLost"]
