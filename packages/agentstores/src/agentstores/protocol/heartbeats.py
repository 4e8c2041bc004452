"""Coalesced heartbeats: every lease of a process beats through one batch per store.

A server holding many leases would spend one round trip per heartbeat. Instead each
lease hands its beat to the :class:`HeartbeatCoalescer` of its supervision store, which
sends what is waiting as one ``compare_and_swap_many`` (group commit: beats handed over
while fewer than ``max_in_flight`` batches are out go at once, together; beats arriving
meanwhile ride the next batch). Every row is still its own compare-and-swap, and each
lease gets its own outcome back as soon as its batch answers, so a lost lease learns it
as promptly as a single call would tell it.

A beat is anything shaped like :class:`Beat` (a swap, the batch it left with, whether
it is settled, and ``resolve``). A lease's running heartbeat is its own beat, handed
over again each interval (:meth:`HeartbeatCoalescer.submit`: nothing allocated per beat,
and its outcome comes back by a plain call); :meth:`HeartbeatCoalescer.beat` awaits one
instead. A batch is one task, whatever its size.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from typing import Protocol

from ..keys import ConversationKey
from ..models import Swap, SwapOutcome
from ..stores import SupervisionStore

log = logging.getLogger(__name__)

MAX_BATCH = 512
"""Most swaps one batch carries (one SQL statement's arrays, one pipeline)."""


class Outstanding(Protocol):
    """A beat as the coalescer sees it, from hand-over to outcome."""

    swap: Swap
    batch: asyncio.Task[None] | None
    """The batch it went out with, once taken (set by the coalescer)."""
    settled: bool
    """Its outcome was delivered, or it was withdrawn: a beat not yet sent is skipped."""

    def resolve(self, outcome: SwapOutcome | None, error: BaseException | None) -> None:
        """Told once, from the batch's task: the row's outcome, or the whole batch's error."""


class Beat:
    """One awaited heartbeat (:meth:`HeartbeatCoalescer.beat`)."""

    __slots__ = ("batch", "done", "settled", "swap")

    def __init__(self, swap: Swap, done: asyncio.Future[SwapOutcome]) -> None:
        self.swap = swap
        self.done = done
        self.batch: asyncio.Task[None] | None = None
        self.settled = False

    def resolve(self, outcome: SwapOutcome | None, error: BaseException | None) -> None:
        """Settle the future (unless its caller gave up)."""
        self.settled = True
        done = self.done
        if done.done():
            return
        if outcome is not None:
            done.set_result(outcome)
        elif isinstance(error, Exception):
            done.set_exception(error)
        else:
            done.cancel()


class HeartbeatCoalescer:
    """Batches the heartbeats of one supervision store (see the module doc)."""

    def __init__(
        self,
        store: SupervisionStore,
        *,
        max_batch: int = MAX_BATCH,
        max_in_flight: int | None = None,
    ) -> None:
        self.store = store
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight or store.max_batches_in_flight
        """Batches in flight at once (default: the store's ``max_batches_in_flight``);
        beats arriving meanwhile wait for the next batch (that wait makes the batches)."""
        self.batches = 0
        """Batches sent so far (for tests and the bench)."""
        self._pending: deque[Outstanding] = deque()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._flush_soon = False

    def submit(self, beat: Outstanding) -> None:
        """Hand ``beat`` over; it is resolved once, from its batch's task.

        Beats handed over in one pass of the event loop (a ticker slot's) leave together:
        the flush runs once, right after. Setting ``settled`` on a beat not yet taken
        (``batch`` still None) withdraws it.
        """
        beat.batch = None
        beat.settled = False
        self._pending.append(beat)
        if not self._flush_soon:
            self._flush_soon = True
            asyncio.get_running_loop().call_soon(self._flush_now)

    async def beat(self, swap: Swap) -> SwapOutcome:
        """Send ``swap`` with the next batch and return its own outcome.

        Cancelling the caller before the beat is sent withdraws it. Once sent, the
        cancelled caller still waits for its batch to settle, then raises: a lease that
        stopped its heartbeat and then seals the turn must not have a beat of the old row
        land after the seal (it would put the row back to running).
        """
        done: asyncio.Future[SwapOutcome] = asyncio.get_running_loop().create_future()
        beat = Beat(swap, done)
        self._pending.append(beat)
        self._flush()
        try:
            return await done
        except asyncio.CancelledError:
            if beat.batch is None:
                beat.settled = True  # withdrawn: never sent
            else:
                await asyncio.wait([beat.batch])
            raise

    def _flush_now(self) -> None:
        self._flush_soon = False
        self._flush()

    def _flush(self) -> None:
        while self._pending and self._in_flight < self.max_in_flight:
            batch = self._take()
            if not batch:
                return
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._send(batch))
            for beat in batch:
                beat.batch = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self) -> list[Outstanding]:
        """Up to ``max_batch`` waiting beats, each key once (a second beat on a key waits)."""
        batch: list[Outstanding] = []
        keys: set[ConversationKey] = set()
        later: list[Outstanding] = []
        while self._pending and len(batch) < self.max_batch:
            beat = self._pending.popleft()
            if beat.settled:  # withdrawn before it was sent
                continue
            if beat.swap.key in keys:
                later.append(beat)
                continue
            keys.add(beat.swap.key)
            batch.append(beat)
        self._pending.extendleft(reversed(later))
        return batch

    async def _send(self, batch: list[Outstanding]) -> None:
        try:
            outcomes = await self.store.compare_and_swap_many([b.swap for b in batch])
        except BaseException as exc:
            _resolve_all(batch, None, exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for b, outcome in zip(batch, outcomes, strict=True):
                _resolve(b, outcome, None)
        finally:
            self.batches += 1
            self._in_flight -= 1
            self._flush()


def _resolve(beat: Outstanding, outcome: SwapOutcome | None, error: BaseException | None) -> None:
    if beat.settled:  # withdrawn meanwhile (expired, or its lease stopped): nobody listens
        return
    try:
        beat.resolve(outcome, error)
    except Exception:  # one lease's bug must not keep the batch's others waiting
        log.exception("heartbeat outcome handler failed")


def _resolve_all(batch: list[Outstanding], outcome: None, error: BaseException) -> None:
    for beat in batch:
        _resolve(beat, outcome, error)


_coalescers: weakref.WeakKeyDictionary[
    SupervisionStore, tuple[asyncio.AbstractEventLoop, HeartbeatCoalescer]
] = weakref.WeakKeyDictionary()


def coalescer_for(store: SupervisionStore) -> HeartbeatCoalescer:
    """The coalescer of ``store`` on the running loop (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _coalescers.get(store)
    if found is None or found[0] is not loop:
        found = (loop, HeartbeatCoalescer(store))
        _coalescers[store] = found
    return found[1]


__all__ = ["MAX_BATCH", "Beat", "HeartbeatCoalescer", "Outstanding", "coalescer_for"]
