"""AgentStoresHistory: a session's Pydantic AI message history in an agentstores
conversation, loaded for ``message_history=`` and extended by each run's new messages.

A run starts from the history it loaded; its new messages are appended on condition
that the conversation still ends where that history ended (``expected_tail``). So of two
runs that started from the same history, the second to store is refused with
:class:`~agentstores.errors.StaleWriteError` instead of interleaving its messages with
the first's, and a retried store of the same run's messages is a no-op (their ids are
digests of the tail and the content, and the store skips ids it holds, before it checks
the tail). Every append is fenced: inside ``conv.turn()`` it carries the lease's epoch,
so a run whose turn was taken over cannot store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.run import AgentRunResult

from agentstores import (
    Conversation,
    ConversationKey,
    Message,
    StoredMessage,
    Stores,
    UsageError,
)
from agentstores.protocol import settled
from agentstores.stores.conversations import MAX_APPEND_BYTES, MAX_BATCH

from .identity import Identities, IdentityResolver, refuse_client_identity
from .rows import Row, is_message_row, load, to_rows

PAGE = 500
"""Rows one read takes while loading a history."""
BATCH_BYTES = MAX_APPEND_BYTES // 2
"""Content bytes one append takes at most (a run over it is stored in several appends)."""


class StoredHistory(list[ModelMessage]):
    """A session's messages as loaded (pass it as ``message_history=``), with where the
    conversation ended when it was read: ``tail``, the id of its last row (None: empty).

    :meth:`AgentStoresHistory.append` with ``after=`` this history stores only if the
    conversation still ends there, and then extends this history in place (no copy of a
    long history per run).
    """

    def __init__(
        self, messages: Iterable[ModelMessage], *, session_id: str, tail: str | None
    ) -> None:
        super().__init__(messages)
        self.session_id = session_id
        self.tail = tail
        self._last_append: tuple[str | None, int] | None = None
        """``(tail before, how many messages)`` of the append that last extended this
        history: the same message objects appended again are a retry of it."""

    def _retry_of_last_append(self, messages: list[ModelMessage]) -> tuple[bool, str | None]:
        """``(True, tail before)`` if ``messages`` are the very objects the last append
        added at the end of this history (a retry after it succeeded), else
        ``(False, tail)``. Identity, not equality: two runs may produce equal messages."""
        last = self._last_append
        if last is not None and last[1] == len(messages) <= len(self):
            added = self[len(self) - len(messages) :]
            if all(a is m for a, m in zip(added, messages, strict=True)):
                return True, last[0]
        return False, self.tail

    def __repr__(self) -> str:
        return (
            f"StoredHistory({len(self)} messages, session_id={self.session_id!r}, "
            f"tail={self.tail!r})"
        )


class AgentStoresHistory:
    """Pydantic AI message histories in ``stores``, one conversation per session id, as
    one fixed ``tenant`` and ``principal`` or as the application's ``identity`` resolver
    says (see :mod:`.identity`)."""

    def __init__(
        self,
        stores: Stores,
        *,
        tenant: str | None = None,
        principal: str = "",
        identity: IdentityResolver | None = None,
    ) -> None:
        self.identities = Identities(tenant, principal, identity)
        self.stores = stores

    def conversation(self, session_id: str) -> Conversation:
        """The agentstores conversation that holds ``session_id``'s history, as the
        acting principal (for ``turn()``, ``share()``, ``delete()``, transcript reads)."""
        key, principal = self.identities.key(session_id)
        return Conversation(self.stores, key, principal)

    async def load(self, session_id: str, *, limit: int | None = None) -> StoredHistory:
        """The session's messages, oldest first (only the last ``limit`` with ``limit``).

        A session the principal may not read loads as an empty history, as an absent one
        does. Rows of the conversation that are not Pydantic AI messages are skipped.

        Raises:
            UsageError: a bad session id or ``limit``, or the resolver's answer.
            pydantic.ValidationError: a stored message this Pydantic AI cannot read.
        """
        key, principal = self.identities.key(session_id)
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise UsageError(f"limit must be a non-negative int or None, got {limit!r}")
        if limit is None:
            rows = await self._rows(key, principal, 0)
        else:
            rows = await self._last_rows(key, principal, limit)
        tail = rows[-1].id if rows else None
        kept = [row.content for row in rows if is_message_row(row)]
        if limit is not None:
            kept = kept[len(kept) - limit :] if limit else []
        return StoredHistory(load(kept), session_id=session_id, tail=tail)

    async def _last_rows(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        """The last ``limit`` rows: the store's one-snapshot ``tail`` read."""
        found = await self.stores.conversations.tail(key, principal, limit)
        return [] if found is None else found.messages

    async def _rows(self, key: ConversationKey, principal: str, start: int) -> list[StoredMessage]:
        rows: list[StoredMessage] = []
        while True:
            page = await self.stores.conversations.read_messages(
                key, principal, start=start, limit=PAGE
            )
            rows += page
            if len(page) < PAGE:
                return rows
            start += len(page)

    async def append(
        self,
        session_id: str,
        messages: Sequence[ModelMessage],
        *,
        after: StoredHistory,
        epoch: int | None = None,
    ) -> StoredHistory:
        """Store ``messages`` (a run's ``result.new_messages()``) after the history the run
        started from, ``after``, in one atomic append: only if the conversation still ends
        where ``after`` ended, and as a no-op when they are already stored there.

        Returns:
            ``after`` itself, extended in place by ``messages`` and its tail moved to the
            last stored row: what the next run of this process continues from. Appending
            the same message objects after it again is a retry, stored as the no-op it is
            (``after`` is not extended twice); ``after`` is unchanged when the append
            raises.

        Raises:
            StaleWriteError: the conversation moved on since ``after`` was loaded (another
                run stored first): nothing lands; load again and decide.
            FencedError: the epoch (the turn's, inside ``conv.turn()``, else ``epoch``) is
                below the conversation's fence: a takeover happened; nothing lands.
            NotOwnedError, ErasedError: as the conversation store raises.
            UsageError: ``after`` is not a :class:`StoredHistory` of this session, or a
                message's ``metadata`` names an identity (:data:`CLIENT_IDENTITY_KEYS`).
        """
        if not isinstance(after, StoredHistory):
            raise UsageError(
                "after= takes the StoredHistory the run started from (AgentStoresHistory.load): "
                "its tail is what the append is conditioned on"
            )
        if after.session_id != session_id:
            raise UsageError(
                f"after= is the history of session {after.session_id!r}, not {session_id!r}"
            )
        messages = list(messages)
        refuse_client_identity(getattr(m, "metadata", None) for m in messages)
        key, principal = self.identities.key(session_id)
        retried, start = after._retry_of_last_append(messages)
        tail = start
        for batch in _batches(to_rows(messages, start)):
            # settled: a caller cancelled mid-append hears it once the append's outcome
            # is decided, never before a write that could still land.
            await settled(
                self.stores.conversations.append_messages(
                    key, principal, batch, expected_tail=tail, epoch=epoch
                )
            )
            tail = batch[-1].id
        if not retried:
            after.extend(messages)
            after.tail = tail
            after._last_append = (start, len(messages))
        return after

    async def run(
        self,
        agent: AbstractAgent[Any, Any],
        session_id: str,
        user_prompt: Any = None,
        *,
        epoch: int | None = None,
        **kwargs: Any,
    ) -> AgentRunResult[Any]:
        """Load the session's history, run ``agent`` on it
        (``agent.run(user_prompt, message_history=..., **kwargs)``) and append the run's
        new messages after it (:meth:`append`).

        Raises:
            UsageError: ``kwargs`` holds ``message_history`` or ``conversation`` (the
                history comes from the store).
            StaleWriteError, FencedError: as :meth:`append` (the run's messages are not
                stored; the result is not returned).
        """
        for name in ("message_history", "conversation"):
            if name in kwargs:
                raise UsageError(f"{name}= is the stored history here; do not pass it")
        history = await self.load(session_id)
        result = await agent.run(user_prompt, message_history=history or None, **kwargs)
        await self.append(session_id, result.new_messages(), after=history, epoch=epoch)
        return result

    async def delete(self, session_id: str) -> bool:
        """Erase the session's conversation (its messages, everything the stores hold for
        it) and leave a tombstone; True if there was something to erase."""
        return await self.conversation(session_id).delete()


def _batches(rows: list[Row]) -> list[list[Message]]:
    """``rows`` in appends of at most :data:`MAX_BATCH` rows and :data:`BATCH_BYTES`
    content bytes (one append unless the run is that large)."""
    batches: list[list[Message]] = []
    current: list[Message] = []
    size = 0
    for row in rows:
        if current and (len(current) >= MAX_BATCH or size + row.size > BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(row.message)
        size += row.size
    if current:
        batches.append(current)
    return batches


__all__ = ["AgentStoresHistory", "StoredHistory"]
