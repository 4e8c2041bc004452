"""Reads and conditional appends on one thread's log (its conversation's transcript).

Every read is by position (``read_messages(start, limit)``); rows never change once
appended, so a position read below a length seen earlier is stable. Every append is
conditioned on the tail it was computed from (``expected_last_message_id``): of two
writers that read the same tail, one lands and the other reads again, so ``heads`` and
the ``seq`` a checkpoint row predicts for its blobs are always right.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from agentstores import (
    ConflictError,
    ConversationKey,
    Message,
    StaleWriteError,
    StoredMessage,
    Stores,
)

from .rows import Heads, heads_of

PAGE = 32
"""Rows one backward read asks for."""
FIRST = 4
"""Rows the first read from the tail asks for (the newest checkpointer row is almost
always among them)."""
ATTEMPTS = 16
"""Conditional appends that may lose to concurrent writers before one gives up."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Tail:
    """The log's length and last message id, the newest ``heads`` in it, and the rows
    read to find them (the log's last rows, oldest first: a reader's cache)."""

    count: int
    tail_id: str | None
    heads: Heads
    rows: list[StoredMessage] = field(default_factory=list)

    def cached(self, start: int, end: int) -> list[StoredMessage] | None:
        """Rows ``start .. end - 1`` if they were all read with the tail."""
        if not self.rows or start < self.rows[0].seq or end > self.count:
            return None
        first = self.rows[0].seq
        return self.rows[start - first : end - first]


class ThreadLog:
    """One thread's log as one principal sees it."""

    def __init__(self, stores: Stores, key: ConversationKey, principal: str) -> None:
        self.stores = stores
        self.key = key
        self.principal = principal

    async def read(self, start: int, limit: int) -> list[StoredMessage]:
        """Rows ``start`` .. ``start + limit - 1`` (fewer at the end)."""
        return await self.stores.conversations.read_messages(
            self.key, self.principal, start=start, limit=limit
        )

    async def backwards(self, end: int, first: int = PAGE) -> AsyncIterator[StoredMessage]:
        """Rows ``end - 1`` down to 0, newest first: ``first`` rows, then a page at a time."""
        size = first
        while end > 0:
            start = max(0, end - size)
            page = await self.read(start, end - start)
            for message in reversed(page):
                yield message
            end = start
            size = PAGE

    async def newest_first(self, tail: Tail) -> AsyncIterator[StoredMessage]:
        """Every row below ``tail.count``, newest first: the tail's cached rows, then
        reads of the older ones."""
        for message in reversed(tail.rows):
            yield message
        async for message in self.backwards(tail.rows[0].seq if tail.rows else tail.count):
            yield message

    async def tail(self) -> Tail | None:
        """The tail, or None when the thread is absent (or not visible to the principal).

        ``heads`` comes from the newest checkpointer row: rows published after it (the
        transcript mirror) are skipped, a bounded walk (one turn's messages)."""
        info = await self.stores.conversations.get_conversation(self.key, self.principal)
        if info is None:
            return None
        heads: Heads = {}
        seen: list[StoredMessage] = []
        async for message in self.backwards(info.message_count, FIRST):
            seen.append(message)
            found = heads_of(message)
            if found is not None:
                heads = found
                break
        seen.reverse()
        if seen and seen[-1].seq != info.message_count - 1:
            seen = []  # the log changed between the two reads: cache nothing
        return Tail(info.message_count, info.tail_message_id, heads, seen)

    async def append(
        self, messages: Sequence[Message], tail: Tail | None, epoch: int | None
    ) -> list[StoredMessage]:
        """Append ``messages`` iff the log still ends where ``tail`` saw it.

        Raises:
            StaleWriteError: another writer appended since (read the tail again).
            FencedError, ErasedError, NotOwnedError: as the conversation store raises.
        """
        return await self.stores.conversations.append_messages(
            self.key,
            self.principal,
            list(messages),
            expected_last_message_id=None if tail is None else tail.tail_id,
            epoch=epoch,
        )


async def retrying(attempt: Callable[[], Awaitable[T]]) -> T:
    """Run ``attempt()`` until it lands without a ``StaleWriteError``."""
    for _ in range(ATTEMPTS):
        try:
            return await attempt()
        except StaleWriteError:
            continue
    raise ConflictError(f"the thread kept changing during {ATTEMPTS} attempts; retry")
