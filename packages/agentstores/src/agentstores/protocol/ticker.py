"""The heartbeat ticker: one loop timer per time slot for every lease of an event loop.

A sleeping task per lease costs the loop a timer pushed and popped and a task woken per
beat, and at thousands of leases that bookkeeping is most of a process's CPU. The
ticker is a timing wheel instead: time is cut into numbered slots of ``resolution``
seconds, an entry is filed under a slot, and one loop timer per non-empty slot calls
``entry.tick(slot)`` for every entry filed there, in filing order. Slots are integers,
so an entry refiling itself every N slots keeps its rhythm exactly (no float drift).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Protocol

log = logging.getLogger(__name__)

RESOLUTION = 0.01
"""Seconds per slot: a 1 s heartbeat interval spreads its beats over 100 slots."""


class Ticking(Protocol):
    """What the ticker files: called back with the slot it was filed under."""

    def tick(self, slot: int) -> object:
        """Run at the start of ``slot``."""


class HeartbeatTicker:
    """The timing wheel of one event loop (see the module doc)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, resolution: float = RESOLUTION) -> None:
        self.loop = loop
        self.resolution = resolution
        self.fired = 0
        """Slot timers run so far (for tests and the bench)."""
        self._slots: dict[int, list[Ticking]] = {}
        self._firing = -1
        """The slot being run, while it runs: an entry filed then goes to a later one."""

    def slot_of(self, when: float) -> int:
        """The slot holding loop time ``when``."""
        return int(when / self.resolution)

    def now(self) -> int:
        """The slot holding the loop's time now."""
        return int(self.loop.time() / self.resolution)

    def slots(self, seconds: float) -> int:
        """Whole slots in ``seconds``, at least one (rounded down: earlier is never late;
        the nudge keeps 1.0 s at 100 slots of 0.01 s, which float division puts a hair
        under)."""
        return max(1, int(seconds / self.resolution + 1e-9))

    def time_of(self, slot: int) -> float:
        """The loop time at which ``slot`` starts."""
        return slot * self.resolution

    def at(self, slot: int, entry: Ticking) -> None:
        """Call ``entry.tick(slot)`` when ``slot`` starts; a slot already past, or the one
        now running, is run as the next slot to come."""
        if slot <= self._firing:
            slot = self._firing + 1
        calls = self._slots.get(slot)
        if calls is None:
            self._slots[slot] = [entry]
            self.loop.call_at(slot * self.resolution, self._fire, slot)
        else:
            calls.append(entry)

    def _fire(self, slot: int) -> None:
        calls = self._slots.pop(slot)
        self.fired += 1
        self._firing = slot
        try:
            for entry in calls:
                try:
                    entry.tick(slot)
                except Exception:  # one lease's bug must not stop the others' beats
                    log.exception("heartbeat tick failed")
        finally:
            self._firing = -1

    def __len__(self) -> int:
        """Entries filed and not yet run (for tests)."""
        return sum(len(calls) for calls in self._slots.values())


_tickers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, HeartbeatTicker] = (
    weakref.WeakKeyDictionary()
)


def ticker_for(loop: asyncio.AbstractEventLoop) -> HeartbeatTicker:
    """The ticker of ``loop`` (made on first use)."""
    found = _tickers.get(loop)
    if found is None:
        found = _tickers[loop] = HeartbeatTicker(loop)
    return found


__all__ = ["RESOLUTION", "HeartbeatTicker", "Ticking", "ticker_for"]
