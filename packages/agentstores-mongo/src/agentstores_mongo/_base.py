"""What every MongoDB store shares: the bundle's context (client, collections, clock,
options) and the error edge."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar, cast

from agentstores.errors import AgentStoresError
from agentstores.keys import ConversationKey
from agentstores.stores import StoreBase
from agentstores.stores._base import TranslatingErrors
from agentstores.stores.kit import DEFAULT_TOMBSTONE_TTL

from .errors import LostReply, is_connection_error, translate_error

COLLECTIONS = ("keys", "messages", "state", "tokens", "oauth_users", "oauth_clients")
"""The collections of one installation, each named ``<prefix><name>``."""


def aware(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (a client built without ``tz_aware`` gives naive
    UTC datetimes back)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@dataclass
class Context:
    """Shared by the stores of one bundle."""

    client: Any
    """The ``AsyncMongoClient``."""
    db: Any
    """The ``AsyncDatabase`` holding the collections."""
    prefix: str
    keys: Any
    messages: Any
    state: Any
    tokens: Any
    oauth_users: Any
    oauth_clients: Any
    tombstone_ttl: timedelta = DEFAULT_TOMBSTONE_TTL
    """How long an erased key refuses late writes (the suite shortens it)."""
    stall_after: float = 2.0
    """Seconds a write waits for another writer's uncommitted documents in its way
    before it retires that writer (bumps the header so its commit can never land)."""
    reconcile_window: float = 5.0
    """Seconds a write whose reply was lost keeps trying to read back its outcome."""
    reconnect_window: float = 5.0
    """Seconds a call keeps resending after a connection failure before anything was
    committed (e.g. while the server restarts)."""
    conflict_deadline: float = 30.0
    """Seconds a write keeps retrying lost races on one header before ``ConflictError``."""

    async def now(self) -> datetime:
        """The server's clock (``hello``'s ``localTime``), aware UTC, millisecond precision."""
        reply = await self.db.command("hello")
        return aware(reply["localTime"])


M = TypeVar("M", bound=Callable[..., Awaitable[Any]])


def resent(method: M) -> M:
    """Run a store method again when the connection fails before anything was committed
    (a server restarting, a pooled connection gone stale), for up to
    ``ctx.reconnect_window`` seconds. Safe: a write commits only by its header CAS, and
    a CAS whose reply was lost is settled by :func:`header.reconcile` or raised as
    ``LostReply``, which is never resent."""

    @functools.wraps(method)
    async def wrapper(self: MongoStoreBase, *args: Any, **kwargs: Any) -> Any:
        deadline: float | None = None
        while True:
            try:
                return await method(self, *args, **kwargs)
            except LostReply:
                raise
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                now = time.monotonic()
                deadline = deadline or now + self.ctx.reconnect_window
                if now >= deadline:
                    raise
                await asyncio.sleep(0.1)

    return wrapper  # type: ignore[return-value]


def cancel_requests() -> int:
    """How many cancellations of the running task are pending (``Task.cancelling()``)."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


class KeepingCancellation(TranslatingErrors):
    """The edge of every store call: the core's error translation, and a cancellation
    the driver swallowed raised again.

    On Python 3.11 ``asyncio.wait_for`` returns its result when the task is cancelled
    just as the awaited future completes (CPython gh-86296, fixed in 3.12), and PyMongo
    awaits every socket write through it: about one cancellation in ten arriving during a
    call is lost and the call returns normally. A lease's heartbeat then never stops
    (``stop_heartbeat`` waits for it forever) and ``asyncio.timeout`` cannot fire. A
    cancellation requested during the call that did not end it is raised here.
    """

    __slots__ = ("asked",)

    def __init__(self, store: StoreBase, operation: str, key: ConversationKey | None) -> None:
        super().__init__(store, operation, key)
        self.asked = 0

    async def __aenter__(self) -> None:
        self.asked = cancel_requests()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not isinstance(exc, asyncio.CancelledError) and cancel_requests() > self.asked:
            raise asyncio.CancelledError("cancelled during a MongoDB call") from exc
        await super().__aexit__(exc_type, exc, tb)


class MongoStoreBase:
    """Mixin for every MongoDB store: the shared context and error translation."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        return translate_error(exc)

    def translating_errors(
        self, operation: str, key: ConversationKey | None = None
    ) -> KeepingCancellation:
        """The core's error edge, keeping cancellations (see :class:`KeepingCancellation`)."""
        return KeepingCancellation(cast(StoreBase, self), operation, key)


__all__ = [
    "COLLECTIONS",
    "Context",
    "KeepingCancellation",
    "MongoStoreBase",
    "aware",
    "cancel_requests",
    "resent",
]
