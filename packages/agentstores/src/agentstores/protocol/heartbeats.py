"""Coalesced heartbeats: every lease of a process beats through one batch per store.

A server holding many leases would spend one round trip per heartbeat. Instead each
lease hands its beat to the :class:`HeartbeatCoalescer` of its supervision store, which
sends what is waiting as one ``compare_and_swap_many`` (group commit: beats handed over
while fewer than ``max_in_flight`` batches are out go at once, together; beats arriving
meanwhile ride the next batch). Every row is still its own compare-and-swap, and each
lease gets its own outcome back as soon as its batch answers, so a lost lease learns it
as promptly as a single call would tell it.

A beat's outcome is delivered by a plain callback (:meth:`HeartbeatCoalescer.submit`,
what a lease's running heartbeat uses: no future and no task per beat) or awaited
(:meth:`HeartbeatCoalescer.beat`). A batch is one task, whatever its size.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from collections.abc import Callable

from ..keys import ConversationKey
from ..models import Swap, SwapOutcome
from ..stores import SupervisionStore

log = logging.getLogger(__name__)

MAX_BATCH = 512
"""Most swaps one batch carries (one SQL statement's arrays, one pipeline)."""

Settle = Callable[[SwapOutcome | None, BaseException | None], object]
"""Told a beat's end once: its outcome, or the error of its whole batch (or its expiry)."""


class Beat:
    """One heartbeat handed to a coalescer, until its outcome is delivered."""

    __slots__ = ("batch", "done", "settle", "settled", "swap")

    def __init__(
        self,
        swap: Swap,
        settle: Settle | None = None,
        done: asyncio.Future[SwapOutcome] | None = None,
    ) -> None:
        self.swap = swap
        self.settle = settle
        self.done = done
        """The awaited path's future (:meth:`HeartbeatCoalescer.beat`)."""
        self.batch: asyncio.Task[None] | None = None
        """The batch this beat went out with, once taken."""
        self.settled = False
        """Its outcome was delivered, or it was withdrawn or expired: nothing more comes."""

    @property
    def dropped(self) -> bool:
        """Settled, or its awaiting caller gave up: a beat not yet sent is then skipped."""
        return self.settled or (self.done is not None and self.done.done())

    def resolve(self, outcome: SwapOutcome | None, error: BaseException | None) -> None:
        """Deliver the beat's end (once; later calls are ignored)."""
        if self.settled:
            return
        self.settled = True
        if self.settle is not None:
            try:
                self.settle(outcome, error)
            except Exception:  # one lease's bug must not keep the batch's others waiting
                log.exception("heartbeat outcome handler failed")
        done = self.done
        if done is not None and not done.done():
            if outcome is not None:
                done.set_result(outcome)
            elif isinstance(error, Exception):
                done.set_exception(error)
            else:
                done.cancel()

    def withdraw(self) -> bool:
        """Drop the beat if it was not sent yet (it then never reaches the store)."""
        if self.batch is not None or self.settled:
            return False
        self.settled = True
        return True

    def expire(self, _due: float = 0.0) -> None:
        """End a beat still unanswered with :class:`TimeoutError` (a late answer is
        ignored); a ticker callback, hence the unused slot time."""
        if not self.settled:
            self.resolve(None, TimeoutError("the heartbeat got no answer in time"))


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
        self._pending: deque[Beat] = deque()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._flush_soon = False

    def submit(self, swap: Swap, settle: Settle) -> Beat:
        """Hand ``swap`` over; ``settle`` is told its end once (from the batch's task).

        Beats submitted in one pass of the event loop (a ticker slot's) leave together:
        the flush runs once, right after. :meth:`Beat.withdraw` takes one back unsent.
        """
        beat = Beat(swap, settle)
        self._pending.append(beat)
        if not self._flush_soon:
            self._flush_soon = True
            asyncio.get_running_loop().call_soon(self._flush_now)
        return beat

    async def beat(self, swap: Swap) -> SwapOutcome:
        """Send ``swap`` with the next batch and return its own outcome.

        Cancelling the caller before the beat is sent withdraws it. Once sent, the
        cancelled caller still waits for its batch to settle, then raises: a lease that
        stopped its heartbeat and then seals the turn must not have a beat of the old row
        land after the seal (it would put the row back to running).
        """
        done: asyncio.Future[SwapOutcome] = asyncio.get_running_loop().create_future()
        beat = Beat(swap, done=done)
        self._pending.append(beat)
        self._flush()
        try:
            return await done
        except asyncio.CancelledError:
            if beat.batch is not None:
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

    def _take(self) -> list[Beat]:
        """Up to ``max_batch`` waiting beats, each key once (a second beat on a key waits)."""
        batch: list[Beat] = []
        keys: set[ConversationKey] = set()
        later: list[Beat] = []
        while self._pending and len(batch) < self.max_batch:
            beat = self._pending.popleft()
            if beat.dropped:  # withdrawn, expired, or its caller gave up before it was sent
                continue
            if beat.swap.key in keys:
                later.append(beat)
                continue
            keys.add(beat.swap.key)
            batch.append(beat)
        self._pending.extendleft(reversed(later))
        return batch

    async def _send(self, batch: list[Beat]) -> None:
        try:
            outcomes = await self.store.compare_and_swap_many([b.swap for b in batch])
        except BaseException as exc:
            for b in batch:
                b.resolve(None, exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for b, outcome in zip(batch, outcomes, strict=True):
                b.resolve(outcome, None)
        finally:
            self.batches += 1
            self._in_flight -= 1
            self._flush()


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


__all__ = ["MAX_BATCH", "Beat", "HeartbeatCoalescer", "Settle", "coalescer_for"]
