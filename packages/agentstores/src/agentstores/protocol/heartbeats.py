"""Coalesced heartbeats: every lease of a process beats through one batch per store.

A server holding many leases would spend one round trip per heartbeat. Instead each
lease hands its beat to the :class:`HeartbeatCoalescer` of its supervision store, which
sends what is waiting as one ``compare_and_swap_many`` (group commit: a beat arriving
while no batch is in flight goes out at once; beats arriving meanwhile ride the next
batch). Every row is still its own compare-and-swap, and each lease gets its own
outcome back as soon as its batch answers, so a lost lease learns it as promptly as a
single call would tell it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from dataclasses import dataclass

from ..keys import ConversationKey
from ..models import Swap, SwapOutcome
from ..stores import SupervisionStore

MAX_BATCH = 512
"""Most swaps one batch carries (one SQL statement's arrays, one pipeline)."""


@dataclass(slots=True)
class _Beat:
    swap: Swap
    done: asyncio.Future[SwapOutcome]
    sent: asyncio.Task[None] | None = None
    """The batch this beat went out with, once taken."""


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
        self._pending: deque[_Beat] = deque()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def beat(self, swap: Swap) -> SwapOutcome:
        """Send ``swap`` with the next batch and return its own outcome.

        Cancelling the caller before the beat is sent withdraws it. Once sent, the
        cancelled caller still waits for its batch to settle, then raises: a lease that
        stopped its heartbeat and then seals the turn must not have a beat of the old row
        land after the seal (it would put the row back to running).
        """
        done: asyncio.Future[SwapOutcome] = asyncio.get_running_loop().create_future()
        beat = _Beat(swap, done)
        self._pending.append(beat)
        self._flush()
        try:
            return await done
        except asyncio.CancelledError:
            if beat.sent is not None:
                await asyncio.wait([beat.sent])
            raise

    def _flush(self) -> None:
        while self._pending and self._in_flight < self.max_in_flight:
            batch = self._take()
            if not batch:
                return
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._send(batch))
            for beat in batch:
                beat.sent = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self) -> list[_Beat]:
        """Up to ``max_batch`` waiting beats, each key once (a second beat on a key waits)."""
        batch: list[_Beat] = []
        keys: set[ConversationKey] = set()
        later: list[_Beat] = []
        while self._pending and len(batch) < self.max_batch:
            beat = self._pending.popleft()
            if beat.done.done():  # its caller gave up before it was sent
                continue
            if beat.swap.key in keys:
                later.append(beat)
                continue
            keys.add(beat.swap.key)
            batch.append(beat)
        self._pending.extendleft(reversed(later))
        return batch

    async def _send(self, batch: list[_Beat]) -> None:
        try:
            outcomes = await self.store.compare_and_swap_many([b.swap for b in batch])
        except BaseException as exc:
            for b in batch:
                if b.done.done():
                    continue
                if isinstance(exc, Exception):
                    b.done.set_exception(exc)
                else:
                    b.done.cancel()
            if not isinstance(exc, Exception):
                raise
        else:
            for b, outcome in zip(batch, outcomes, strict=True):
                if not b.done.done():
                    b.done.set_result(outcome)
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


__all__ = ["MAX_BATCH", "HeartbeatCoalescer", "coalescer_for"]
