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
from collections.abc import Coroutine
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
    StaleWriteError,
    Stores,
    UsageError,
)
from agentstores.protocol import settled
from agentstores.protocol.lease import DEFAULT_LEASE_CONFIG, LeaseConfig
from agentstores.protocol.turn import Turn
from agentstores.stores.conversations import MAX_BATCH

from .identity import Identities, IdentityResolver
from .rows import SESSION_METADATA, encode, items_of

T = TypeVar("T")


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
        self._labelled: set[ConversationKey] = set()
        """Sessions this object has written ``SESSION_METADATA`` to (once is enough)."""
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
                one-append limits (1,000 items; 64 MiB).
            NotOwnedError: another principal owns the session.
            FencedError: a takeover fenced this producer out (inside a turn).
            ErasedError: the session was erased.
        """
        if not items:
            return
        await settled(self._on_loop(self._add_items(list(items))))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the last item (None when there is none, or the session is
        another principal's and not shared): that item alone, also while other writers
        add items (the removal is conditional on it still being last; when it is not, the
        new last item is read and popped). Fenced inside a turn.

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
        self._labelled.clear()
        return await self._on_loop(self.conversation().delete())

    # --- the work ---------------------------------------------------------------------

    async def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        conv = self.conversation()
        if limit is None or limit < 0:
            return items_of(await conv.messages())
        if limit == 0:
            return []
        found = await conv.tail(limit)  # one request: the last rows are the last items
        return [] if found is None else items_of(found.messages)

    async def _add_items(self, items: list[Any]) -> None:
        conv = self.conversation()
        rows = encode(items)
        if len(rows) > MAX_BATCH:
            raise UsageError(
                f"add_items of {len(items)} items is over the {MAX_BATCH} one append holds: "
                "add them in smaller calls"
            )
        label = conv.key not in self._labelled
        await conv.append(*rows, metadata=SESSION_METADATA if label else None)
        self._labelled.add(conv.key)

    async def _pop_item(self) -> TResponseInputItem | None:
        conv = self.conversation()
        while True:
            found = await conv.tail(1)
            if found is None or not found.messages:
                return None
            last = found.messages[-1]
            try:
                await conv.truncate(last.id, cut="before", expected_tail=last.id)
            except (StaleWriteError, NotFoundError):
                continue  # another writer added, removed or erased meanwhile: look again
            return last.content  # type: ignore[no-any-return]

    async def _clear(self) -> None:
        conv = self.conversation()
        while True:
            first = await conv.messages(limit=1)
            if not first:
                return  # empty, absent, erased or not visible
            try:
                await conv.truncate(first[0].id, cut="before")
            except NotFoundError:
                continue  # another writer cleared or erased it meanwhile: look again
            return

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


__all__ = ["AgentStoresSession"]
