"""Reads and conditional appends on one thread's log (its conversation's transcript).

Every read is by position (``read_messages(start, limit)``); rows never change once
appended, so a position read below a length seen earlier is stable. Every append is
conditioned on the tail it was computed from (``expected_tail``): of two
writers that read the same tail, one lands and the other reads again, so ``heads`` and
the ``seq`` a checkpoint row predicts for itself are always right.

A saver keeps each thread's last tail (:class:`TailCache`): rows never change once
appended and a log only grows at its end or loses a suffix, so if the row at the cached
tail's position still has the cached id, every row below it is still the one cached.
A write is then one conditional append on the cached tail (a stale one is refused by
the store and read again), and a read is one read of the rows from the cached tail on,
whatever the thread's length.
"""

from __future__ import annotations

from collections import OrderedDict
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

from .rows import OWN_ROWS, Heads, approx_size, as_checkpoint, heads_of, own_of

PAGE = 32
"""Rows one backward read asks for."""
FIRST = 4
"""Rows the first read from the tail asks for (the newest checkpointer row is almost
always among them)."""
ATTEMPTS = 16
"""Conditional appends that may lose to concurrent writers before one gives up."""
REFRESH = 64
"""Rows one read from a cached tail asks for; a thread that grew by more since is read
afresh (its length first)."""
KEEP = 32
"""Newest rows a cached tail keeps (the latest checkpoint and its writes, normally)."""
KNOWN = 256
"""Older rows (channel values) a cached tail keeps, by position."""
THREADS = 1024
"""Threads whose tails one saver keeps (least recently used dropped first)."""
BUDGET = 64 * 1024 * 1024
"""Roughly the bytes of rows one saver's cached tails may hold (least recently used
dropped first; a tail bigger than this is not kept)."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Tail:
    """The log's length and last message id, the newest ``heads`` in it, and the rows
    read to find them (the log's last rows, oldest first: a reader's cache)."""

    count: int
    tail_id: str | None
    heads: Heads
    rows: list[StoredMessage] = field(default_factory=list)
    own: int = 0
    """The checkpointer's rows in the log (from its newest row)."""
    known: dict[int, StoredMessage] = field(default_factory=dict)
    """Older rows (channel values) the newest checkpoints point at, read or written
    since this log was last read afresh (valid while the tail is)."""
    needed: dict[str, frozenset[int]] = field(default_factory=dict)
    """Per namespace, the positions of the values its newest checkpoint seen points at."""
    weights: dict[int, int] | None = None
    """:func:`approx_size` of every row held (``rows`` and ``known``), by position: a row
    is weighed once, when it joins the tail, not on every put (None: not yet weighed)."""

    def held(self) -> dict[int, int]:
        """:attr:`weights`, weighing the rows the first time."""
        if self.weights is None:
            weights = {m.seq: approx_size(m) for m in self.rows}
            weights.update((seq, approx_size(m)) for seq, m in self.known.items())
            object.__setattr__(self, "weights", weights)
            return weights
        return self.weights

    def size(self) -> int:
        """Roughly the bytes this tail holds (its rows and the older rows it knows)."""
        return sum(self.held().values())

    def row(self, seq: int) -> StoredMessage | None:
        """The row at ``seq`` if the tail holds it (among its rows or the older known)."""
        if self.rows and self.rows[0].seq <= seq <= self.rows[-1].seq:
            return self.rows[seq - self.rows[0].seq]
        return self.known.get(seq)

    def cached(self, start: int, end: int) -> list[StoredMessage] | None:
        """Rows ``start .. end - 1`` if they were all read with the tail."""
        if not self.rows or start < self.rows[0].seq or end > self.count:
            return None
        first = self.rows[0].seq
        return self.rows[start - first : end - first]

    def extended(self, rows: Sequence[StoredMessage]) -> Tail:
        """This tail with ``rows`` (the rows right after it) appended."""
        if not rows:
            return self
        heads, own = self.heads, self.own
        for message in reversed(rows):
            found = heads_of(message)
            if found is not None:
                heads, own = found, own_of(message) or 0
                break
        kept = [*self.rows, *rows]
        window = kept[-KEEP:]
        dropped = kept[:-KEEP]
        # the older values the newest checkpoints point at (an unchanged channel's), so
        # reading the latest, or locating a put's parent, needs no read of older rows
        needed = with_needed(self.needed, rows)
        wanted = frozenset().union(*needed.values())
        known = {seq: m for seq, m in self.known.items() if seq in wanted}
        for message in dropped:
            if message.seq in wanted and len(known) < KNOWN:
                known[message.seq] = message
        weights = dict(self.held())
        for message in dropped:
            if message.seq not in known:
                weights.pop(message.seq, None)
        for seq in self.known:
            if seq not in known:
                weights.pop(seq, None)  # an older value no checkpoint seen points at now
        for message in rows:
            weights[message.seq] = approx_size(message)
        return Tail(rows[-1].seq + 1, rows[-1].id, heads, window, own, known, needed, weights)

    def remember(self, message: StoredMessage) -> None:
        """Keep ``message`` among the older rows known (the oldest known dropped)."""
        weights = self.held()
        self.known[message.seq] = message
        weights[message.seq] = approx_size(message)
        while len(self.known) > KNOWN:
            oldest = next(iter(self.known))
            del self.known[oldest]
            if self.row(oldest) is None:  # not also among the newest rows
                weights.pop(oldest, None)


def with_needed(
    needed: dict[str, frozenset[int]], rows: Sequence[StoredMessage]
) -> dict[str, frozenset[int]]:
    """``needed`` updated by the checkpoint rows among ``rows`` (oldest first)."""
    updated = dict(needed)
    for message in rows:
        checkpoint = as_checkpoint(message)
        if checkpoint is not None:
            updated[checkpoint.ns] = frozenset(int(loc[1]) for loc in checkpoint.locs.values())
    return updated


class TailCache:
    """The last tail seen of each (thread, principal), least recently used dropped, at
    most ``size`` threads and roughly ``budget`` bytes of rows."""

    def __init__(self, size: int = THREADS, budget: int = BUDGET) -> None:
        self.size = size
        self.budget = budget
        self.held = 0
        self._tails: OrderedDict[tuple[ConversationKey, str], tuple[Tail, int]] = OrderedDict()

    def get(self, key: ConversationKey, principal: str) -> Tail | None:
        entry = self._tails.get((key, principal))
        if entry is None:
            return None
        self._tails.move_to_end((key, principal))
        return entry[0]

    def set(self, key: ConversationKey, principal: str, tail: Tail | None) -> None:
        self._drop((key, principal))
        if tail is None or not tail.rows or self.size <= 0:
            return
        weight = tail.size()
        if weight > self.budget:
            return
        self._tails[(key, principal)] = (tail, weight)
        self.held += weight
        while len(self._tails) > self.size or self.held > self.budget:
            self._drop(next(iter(self._tails)))

    def _drop(self, cached: tuple[ConversationKey, str]) -> None:
        entry = self._tails.pop(cached, None)
        if entry is not None:
            self.held -= entry[1]

    def forget(self, key: ConversationKey) -> None:
        """Drop every principal's tail of ``key`` (erased, or written outside the log)."""
        for cached in [k for k in self._tails if k[0] == key]:
            self._drop(cached)


class ThreadLog:
    """One thread's log as one principal sees it."""

    def __init__(
        self,
        stores: Stores,
        key: ConversationKey,
        principal: str,
        cache: TailCache | None = None,
    ) -> None:
        self.stores = stores
        self.key = key
        self.principal = principal
        self.cache = cache if cache is not None else TailCache(0)

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

    async def rows_at(self, tail: Tail, seqs: Sequence[int]) -> dict[int, StoredMessage]:
        """The rows at ``seqs`` (all below ``tail.count``): from the tail's rows and the
        older rows it knows, the rest read in contiguous runs (and remembered)."""
        found = {m.seq: m for m in tail.rows}
        wanted: list[int] = []
        for seq in sorted(set(seqs)):
            known = found.get(seq) or tail.known.get(seq)
            if known is not None:
                found[seq] = known
            else:
                wanted.append(seq)
        i = 0
        while i < len(wanted):
            j = i
            while j + 1 < len(wanted) and wanted[j + 1] == wanted[j] + 1:
                j += 1
            for message in await self.read(wanted[i], wanted[j] - wanted[i] + 1):
                found[message.seq] = message
                tail.remember(message)
            i = j + 1
        if wanted and self.cache.get(self.key, self.principal) is tail:
            self.cache.set(self.key, self.principal, tail)  # weigh what it now knows
        return found

    def cached_tail(self) -> Tail | None:
        """The tail this saver last saw (no read): what a write is conditioned on first."""
        return self.cache.get(self.key, self.principal)

    def landed(self, tail: Tail | None, stored: Sequence[StoredMessage]) -> None:
        """Record the tail after this saver's append of ``stored`` on ``tail``."""
        if tail is None and stored and stored[0].seq == 0:
            tail = Tail(0, None, {})  # this append created the thread
        if tail is None or not stored or stored[0].seq != tail.count:
            self.cache.set(self.key, self.principal, None)  # position unknown: read afresh
            return
        self.cache.set(self.key, self.principal, tail.extended(stored))

    async def tail(self) -> Tail | None:
        """The current tail, or None when the thread is absent (or not visible).

        From a cached tail: one read of the rows from it on (see the module docstring);
        otherwise, or when the log changed under it, the thread's length, then its last
        rows."""
        cached = self.cached_tail()
        if cached is not None:
            start = cached.count - 1
            rows = await self.read(start, REFRESH)
            unchanged = bool(rows) and rows[0].seq == start and rows[0].id == cached.tail_id
            if unchanged and len(rows) < REFRESH:  # else: grew by too much, or was cut
                tail = cached.extended(rows[1:])
                self.cache.set(self.key, self.principal, tail)
                return tail
        fresh = await self._fresh_tail()
        self.cache.set(self.key, self.principal, fresh)
        return fresh

    async def _fresh_tail(self) -> Tail | None:
        info = await self.stores.conversations.get_conversation(self.key, self.principal)
        if info is None:
            return None
        heads: Heads = {}
        own = 0
        seen: list[StoredMessage] = []
        end, size = info.message_count, FIRST
        while end > 0:
            start = max(0, end - size)
            page = await self.read(start, end - start)
            seen[:0] = page
            newest = next((m for m in reversed(page) if heads_of(m) is not None), None)
            if newest is not None:
                heads, own = heads_of(newest) or {}, own_of(newest) or 0
                break
            end, size = start, PAGE
        if seen and (seen[-1].seq != info.message_count - 1 or seen[-1].id != info.tail_message_id):
            seen = []  # the log changed between the two reads: cache nothing
        needed = with_needed({}, seen)
        return Tail(info.message_count, info.tail_message_id, heads, seen, own, needed=needed)

    async def append(
        self, messages: Sequence[Message], tail: Tail | None, epoch: int | None, own: int
    ) -> list[StoredMessage]:
        """Append ``messages`` iff the log still ends where ``tail`` saw it, and record
        ``own`` (the checkpointer's rows after it) in the conversation metadata.

        Raises:
            StaleWriteError: another writer appended since (read the tail again).
            FencedError, ErasedError, NotOwnedError: as the conversation store raises.
        """
        return await self.stores.conversations.append_messages(
            self.key,
            self.principal,
            list(messages),
            expected_tail=None if tail is None else tail.tail_id,
            epoch=epoch,
            metadata={OWN_ROWS: own},
        )


async def retrying(attempt: Callable[[], Awaitable[T]]) -> T:
    """Run ``attempt()`` until it lands without a ``StaleWriteError``."""
    for _ in range(ATTEMPTS):
        try:
            return await attempt()
        except StaleWriteError:
            continue
    raise ConflictError(f"the thread kept changing during {ATTEMPTS} attempts; retry")
