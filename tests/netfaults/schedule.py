"""A fault schedule: a task that keeps breaking the network between clients and their
server, from a seed, while a workload runs.

Each step takes the next fault of a shuffled cycle of all of them (so a short run meets
every kind), holds it, then lets the network pass for a while: a delay
(tens to hundreds of milliseconds per chunk), lost replies, connections cut mid-call, a
blackhole shorter than the client's timeout (so a waiting call ends by its timeout, not
by the hole closing) and a partition of a few seconds, then healed. The same seed gives
the same sequence of faults and durations (not the same calls hit: those depend on
timing).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from dataclasses import dataclass, field

from tests.servers.netfault import NetFaultProxy

FAULTS = ("delay", "drop_replies", "cut", "blackhole", "partition")


@dataclass
class FaultSchedule:
    """Drive ``proxy`` through random faults until cancelled (or :meth:`run`'s ``until``).

    ``client_timeout`` is the client's reply timeout in seconds: a blackhole lasts less
    than it. ``quiet`` is the range of seconds the network passes between faults."""

    proxy: NetFaultProxy
    seed: int
    client_timeout: float
    quiet: tuple[float, float] = (0.2, 0.8)
    partition_seconds: tuple[float, float] = (1.0, 3.0)
    faults: tuple[str, ...] = FAULTS
    steps: Counter[str] = field(default_factory=Counter)
    """How many times each fault was switched on."""
    log: list[tuple[float, str]] = field(default_factory=list)
    """(loop time, mode) each time the mode changed."""

    def __post_init__(self) -> None:
        unknown = set(self.faults) - set(FAULTS)
        if unknown or not self.faults:
            raise ValueError(f"faults must be a non-empty subset of {FAULTS}, not {self.faults}")
        if self.client_timeout <= 0:
            raise ValueError("client_timeout must be positive")

    async def run(self, until: asyncio.Event | None = None) -> None:
        """Cycle faults until cancelled or ``until`` is set; always ends healed."""
        rng = random.Random(self.seed)
        loop = asyncio.get_running_loop()
        cycle: list[str] = []
        try:
            while until is None or not until.is_set():
                if not cycle:  # every fault once per cycle, in a shuffled order
                    cycle = rng.sample(self.faults, len(self.faults))
                fault = cycle.pop()
                hold = self._switch(fault, rng)
                self.steps[fault] += 1
                self.log.append((loop.time(), fault))
                await self._sleep(hold, until)
                self.proxy.heal()
                self.log.append((loop.time(), "pass"))
                await self._sleep(rng.uniform(*self.quiet), until)
        finally:
            self.proxy.heal()

    def _switch(self, fault: str, rng: random.Random) -> float:
        """Turn ``fault`` on; returns how long to hold it."""
        if fault == "delay":
            self.proxy.delay(rng.choice((20, 100, 300)))
            return rng.uniform(0.5, 1.5)
        if fault == "drop_replies":
            self.proxy.drop_replies()
            return rng.uniform(0.05, 0.3)
        if fault == "cut":
            self.proxy.cut(rng.choice((0, 1, 8, 64)))
            return rng.uniform(0.05, 0.3)
        if fault == "blackhole":
            self.proxy.blackhole()
            return rng.uniform(0.2, 0.6) * self.client_timeout
        self.proxy.partition()
        return rng.uniform(*self.partition_seconds)

    @staticmethod
    async def _sleep(seconds: float, until: asyncio.Event | None) -> None:
        if until is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(until.wait(), seconds)


__all__ = ["FAULTS", "FaultSchedule"]
