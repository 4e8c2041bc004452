"""``AgentStoresSession``: the SDK's ``Session`` over one agentstores conversation.

The session id names a conversation inside the tenant the application gives
(``ConversationKey(tenant, session_id)``); each item is one transcript row (see
:mod:`.rows`). Every call acts as the application's principal, so everything the
conversation promises covers the session: one ``add_items`` is one append (all or
nothing, also when the calling task is cancelled), another principal's session reads as
absent and refuses writes, and inside a turn (:meth:`AgentStoresSession.turn`) every
write carries the lease's epoch, so a producer fenced out by a takeover writes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from agentstores import (
    Conversation,
    ConversationKey,
    NotFoundError,
    Stores,
    UnsupportedError,
    UsageError,
)
from agentstores.protocol.lease import DEFAULT_LEASE_CONFIG, LeaseConfig
from agentstores.protocol.turn import Turn
from agentstores.stores.conversations import MAX_BATCH

from .identity import Identities, IdentityResolver
from .rows import GAP, HEAD_ID, SESSION_METADATA, encode, items_of, kind_of

T = TypeVar("T")


async def settled(work: Awaitable[T]) -> T:
    """Await a write to its outcome even when the caller is cancelled, then re-raise the
    cancellation: a write the caller gave up on must not land later (some adapters run
    a call in a worker thread that a cancellation does not stop)."""
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller hears
        raise cancelled
    return task.result()


FAST_READ_WINDOWS = 4
"""How many windows' worth of rows a one-request ``get_items(limit)`` may read past where
the session object last saw the tail (more: other writers added much; read by count)."""
POP_WINDOW = 3
"""Rows ``pop_item`` reads from the end: the last item, its gap, and the row before."""


class AgentStoresSession(SessionABC):
    """The SDK's session protocol over the conversation ``(tenant, session_id)``.

    Give the identity the application trusts: ``tenant=`` and ``principal=`` (fixed),
    or ``identity=`` (a resolver called on every call). Create the session in the event
    loop that owns ``stores``; calls from another loop (``Runner.run_sync`` in a worker
    thread) are run on that loop.

    It subclasses ``SessionABC`` (not only the ``Session`` protocol) because the SDK's
    wrappers, ``EncryptedSession`` among them, are typed to take one.
    """

    def __init__(
        self,
        session_id: str,
        stores: Stores,
        *,
        tenant: str | None = None,
        principal: str = "",
        identity: IdentityResolver | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        ConversationKey("t", session_id)  # a bad session id fails here
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.stores = stores
        self._identities = Identities(tenant, principal, identity)
        self._headed: set[ConversationKey] = set()
        self._length: dict[ConversationKey, int] = {}
        """How many rows each conversation held when this object last wrote or read it:
        where a windowed read starts (a hint: a wrong one costs a second request)."""
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    def __repr__(self) -> str:
        return f"AgentStoresSession({self.session_id!r})"

    def conversation(self) -> Conversation:
        """The conversation this session is, as the current call's principal sees it."""
        tenant, principal = self._identities()
        return self.stores.conversation(ConversationKey(tenant, self.session_id), principal)

    # --- the Session protocol ---------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items, oldest first; with ``limit`` (or the settings' limit) the last
        ``limit`` (none for 0, all for a negative limit, as ``SQLiteSession``)."""
        return await self._on_loop(
            self._get_items(resolve_session_limit(limit, self.session_settings))
        )

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in one store call: all land or none do. Cancelled mid-call,
        it waits for that call's outcome before raising ``CancelledError``, so nothing
        lands after it ended (as the SDK's own sessions do).

        Raises:
            UsageError: an item is not a JSON mapping, or the batch is over the store's
                one-append limits (1,000 rows, a user message counting two; 64 MiB).
            NotOwnedError: another principal owns the session.
            FencedError: a takeover fenced this producer out (inside a turn).
            ErasedError: the session was erased.
        """
        if not items:
            return
        await settled(self._on_loop(self._add_items(list(items))))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the last item (None when there is none, or the session is
        another principal's and not shared). Fenced inside a turn.

        Raises:
            NotOwnedError: the session is shared with this principal, not owned.
            FencedError: a takeover fenced this producer out (inside a turn).
        """
        return await settled(self._on_loop(self._pop_item()))

    async def clear_session(self) -> None:
        """Remove every item; the session stays usable (unlike erasure: see
        :meth:`delete`). A no-op on a session this principal cannot see.

        Raises:
            NotOwnedError: the session is shared with this principal, not owned.
            FencedError: a takeover fenced this producer out (inside a turn).
        """
        await settled(self._on_loop(self._clear()))

    # --- beyond the protocol ----------------------------------------------------------

    def turn(
        self, message_id: str | None = None, *, lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG
    ) -> Turn:
        """The conversation's turn lease, to run one ``Runner`` turn under (``async with``).

        While it is held, another replica's ``turn()`` on this session raises
        ``BusyError`` (naming the running turn), unless it names the same ``message_id``
        (a retry of this turn: a takeover, which fences this one), or this one stopped
        beating (dead after 3 s). Every session write inside carries the lease's epoch:
        after a takeover they raise ``FencedError`` and land nothing. See
        :func:`~agentstores_openai_agents.run_turn`.
        """
        return self.conversation().turn(message_id, lease_config=lease_config)

    async def delete(self) -> bool:
        """Erase the session (transcript and metadata, leaving a tombstone that refuses
        later writes under this id); True if there was something to erase."""
        self._headed.clear()
        self._length.clear()
        return await self._on_loop(self.conversation().delete())

    # --- the work ---------------------------------------------------------------------

    async def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        conv = self.conversation()
        if limit is None or limit < 0:
            return items_of(await conv.messages())
        if limit == 0:
            return []
        window = 2 * limit + 1  # every user item has a gap after it; the head
        known = self._length.get(conv.key)
        if known is not None:
            # One request, from where this object last saw the tail: a read by position
            # runs to the tail as it is now, so its last items are the last items, unless
            # the log shrank below the window's start (too few: read as below) or grew
            # past what one read here may bring (a full read: read as below).
            start = max(0, known - window)
            cap = FAST_READ_WINDOWS * window
            rows = await conv.messages(start=start, limit=cap)
            found = items_of(rows)
            if len(rows) < cap and (len(found) >= limit or start == 0):
                self._length[conv.key] = rows[-1].seq + 1 if rows else 0
                return found[-limit:]
        while True:
            info = await conv.info()
            if info is None:
                return []
            start = max(0, info.message_count - window)
            rows = await conv.messages(start=start)
            self._length[conv.key] = info.message_count
            found = items_of(rows)
            if len(found) >= limit or (start == 0 and rows):
                return found[-limit:]
            if start == 0:  # truncated to nothing meanwhile
                return []
            window *= 2  # the log changed between the two reads: read more

    async def _add_items(self, items: list[Any]) -> None:
        conv = self.conversation()
        head = conv.key not in self._headed
        rows = encode(items, head=head)
        if len(rows) > MAX_BATCH:
            raise UsageError(
                f"add_items of {len(items)} items needs {len(rows)} rows; one append holds "
                f"at most {MAX_BATCH} (a user message takes two): add them in smaller calls"
            )
        stored = await conv.append(*rows, metadata=SESSION_METADATA if head else None)
        self._headed.add(conv.key)
        if stored:
            self._length[conv.key] = stored[-1].seq + 1

    async def _pop_item(self) -> TResponseInputItem | None:
        conv = self.conversation()
        self._length.pop(conv.key, None)
        while True:
            info = await conv.info()
            if info is None or info.message_count == 0:
                return None
            rows = await conv.messages(start=max(0, info.message_count - POP_WINDOW))
            if not rows:
                continue  # truncated between the two reads
            last = len(rows) - 1
            if kind_of(rows[last]) == GAP and last > 0:
                last -= 1
            item_row = rows[last]
            if kind_of(item_row) is not None:
                return None  # only the head (and markers) left
            if item_row.role == "user":
                cut = item_row.id  # a user row goes with everything after it
            elif last > 0:
                cut = rows[last - 1].id  # a non-user row: kept, everything after goes
            elif item_row.seq == 0:
                raise _headless(conv)
            else:
                continue  # the window began at this item: the log changed, read again
            await conv.truncate(cut)
            return item_row.content  # type: ignore[no-any-return]

    async def _clear(self) -> None:
        conv = self.conversation()
        self._length.pop(conv.key, None)
        info = await conv.info()
        if info is None or info.message_count <= 1:
            return
        try:
            await conv.truncate(HEAD_ID)
        except NotFoundError as exc:
            if await conv.info() is None:
                return  # erased meanwhile
            raise _headless(conv) from exc

    async def _on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the loop that owns the stores (this one, unless called from a
        worker thread's loop, as ``Runner.run_sync`` does there)."""
        running = asyncio.get_running_loop()
        if self._loop is None or self._loop.is_closed():
            self._loop = running
        if running is self._loop or not self._loop.is_running():
            return await work
        # The task runs in a copy of this context: the ambient epoch of a turn goes along.
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))


def _headless(conv: Conversation) -> UnsupportedError:
    return UnsupportedError(
        f"{conv.key!r} does not begin with the session's head row (it was written other than "
        "through AgentStoresSession, or recreated after an erasure by a session object that "
        "had written it before): its first item cannot be removed alone"
    )


__all__ = ["AgentStoresSession"]
