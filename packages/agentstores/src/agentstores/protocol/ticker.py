"""The heartbeat ticker: one loop timer per time slot for every lease of an event loop.

A sleeping task per lease costs the loop a timer pushed and popped and a task woken per
beat, and at thousands of leases that bookkeeping is most of a process's CPU. The
ticker is a timing wheel instead: time is cut into slots of ``resolution`` seconds, a
callback is filed under the slot its time falls in (never later than asked: earlier is
never late for a heartbeat), and one loop timer per non-empty slot runs every callback
filed there, in filing order, each with the slot's time.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable

log = logging.getLogger(__name__)

RESOLUTION = 0.01
"""Seconds per slot: a 1 s heartbeat interval spreads its beats over 100 slots."""

Tick = Callable[[float], object]
"""A filed callback; it is called with its slot's time (loop clock)."""


class HeartbeatTicker:
    """The timing wheel of one event loop (see the module doc)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, resolution: float = RESOLUTION) -> None:
        self.loop = loop
        self.resolution = resolution
        self.fired = 0
        """Slot timers run so far (for tests and the bench)."""
        self._slots: dict[int, list[Tick]] = {}
        self._firing = -1
        """The slot being run, while it runs: a callback filed then goes to a later one."""

    def at(self, when: float, call: Tick) -> None:
        """Call ``call(slot_time)`` in the slot holding ``when`` (loop clock); a time in
        the past, or in the slot now running, is run in the next slot to come."""
        n = int(when // self.resolution)
        if n <= self._firing:
            n = self._firing + 1
        calls = self._slots.get(n)
        if calls is None:
            self._slots[n] = [call]
            self.loop.call_at(n * self.resolution, self._fire, n)
        else:
            calls.append(call)

    def _fire(self, n: int) -> None:
        calls = self._slots.pop(n)
        self.fired += 1
        self._firing = n
        due = n * self.resolution
        try:
            for call in calls:
                try:
                    call(due)
                except Exception:  # one lease's bug must not stop the others' beats
                    log.exception("heartbeat tick failed")
        finally:
            self._firing = -1

    def __len__(self) -> int:
        """Callbacks filed and not yet run (for tests)."""
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


__all__ = ["RESOLUTION", "HeartbeatTicker", "Tick", "ticker_for"]
