"""The heartbeat ticker: entries run in their slot, in filing order, one loop timer per
slot, and an entry refiling itself every N slots keeps an exact rhythm."""

from __future__ import annotations

import asyncio

from agentstores.protocol.ticker import HeartbeatTicker


class Recorder:
    def __init__(self, ticker: HeartbeatTicker, every: int = 0, times: int = 1) -> None:
        self.ticker, self.every, self.left = ticker, every, times
        self.slots: list[int] = []
        self.done = asyncio.Event()

    def tick(self, slot: int) -> None:
        self.slots.append(slot)
        self.left -= 1
        if self.left and self.every:
            self.ticker.at(slot + self.every, self)
        elif not self.left:
            self.done.set()


async def test_entries_of_a_slot_run_together_in_filing_order() -> None:
    ticker = HeartbeatTicker(asyncio.get_running_loop())
    order: list[str] = []
    all_ran = asyncio.Event()

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

        def tick(self, slot: int) -> None:
            order.append(self.name)
            if len(order) == 4:
                all_ran.set()

    soon = ticker.now() + 2
    for name in "abc":
        ticker.at(soon, Named(name))
    ticker.at(soon + 1, Named("d"))
    assert len(ticker) == 4
    await asyncio.wait_for(all_ran.wait(), timeout=30)
    assert order == ["a", "b", "c", "d"]
    assert ticker.fired == 2, "one timer per slot, not per entry"


async def test_a_refiling_entry_keeps_its_rhythm_and_past_slots_run_next() -> None:
    ticker = HeartbeatTicker(asyncio.get_running_loop())
    assert ticker.slots(1.0) == 100 and ticker.slots(0.001) == 1
    every = Recorder(ticker, every=3, times=5)
    ticker.at(ticker.now() - 10, every)  # already past: runs as the next slot
    await asyncio.wait_for(every.done.wait(), timeout=30)
    gaps = {b - a for a, b in zip(every.slots, every.slots[1:], strict=False)}
    assert gaps == {3}


async def test_an_entry_filed_into_the_running_slot_runs_in_a_later_one() -> None:
    ticker = HeartbeatTicker(asyncio.get_running_loop())
    again = Recorder(ticker, every=0, times=2)

    class Refiler:
        def tick(self, slot: int) -> None:
            again.tick(slot)
            if again.left:
                ticker.at(slot, self)

    ticker.at(ticker.now() + 1, Refiler())
    await asyncio.wait_for(again.done.wait(), timeout=30)
    assert again.slots[1] > again.slots[0]
