"""Retention: erase expired, idle and over-cap conversations in batches.

The store finds candidates and re-checks each rule atomically with the erase
(``erase_if``), so a conversation touched between finding and erasing survives. Erasure
is the same cascade as an owner's delete (transcript, state, recording, supervision,
pause tokens, tombstone).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from ..errors import UsageError
from ..keys import ConversationKey
from ..stores import Expired, IdleFor, OverCap, Stores, SweepRule

log = logging.getLogger(__name__)


@dataclass(slots=True)
class SweepReport:
    """What one sweep did. ``survived`` counts candidates the atomic re-check kept."""

    expired: int = 0
    idle: int = 0
    over_cap: int = 0
    survived: int = 0
    batches: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def erased(self) -> int:
        """Conversations this sweep erased, over every rule."""
        return self.expired + self.idle + self.over_cap


class Sweeper:
    """Applies the configured rules; ``None`` switches a rule off.

    ``expire``: temporary conversations past ``expires_at``; ``idle_for``: conversations
    not updated for that long; ``keep_per_principal``: keep each owner's N most
    recently updated conversations per tenant. ``max_batches`` bounds one rule's work
    per sweep, so one sweep cannot run unboundedly under a steady inflow.
    ``on_batch(rule_name, keys)``, if given, is awaited with each batch of candidates
    before they are erased (for metrics, logging or audit).
    """

    def __init__(
        self,
        stores: Stores,
        *,
        expire: bool = True,
        idle_for: timedelta | None = None,
        keep_per_principal: int | None = None,
        batch_size: int = 100,
        max_batches: int = 100,
        on_batch: Callable[[str, list[ConversationKey]], Awaitable[None]] | None = None,
    ) -> None:
        if batch_size < 1 or max_batches < 1:
            raise UsageError("batch_size and max_batches must be at least 1")
        self.stores = stores
        self.rules: list[tuple[str, SweepRule]] = []
        if expire:
            self.rules.append(("expired", Expired()))
        if idle_for is not None:
            self.rules.append(("idle", IdleFor(idle_for)))
        if keep_per_principal is not None:
            self.rules.append(("over_cap", OverCap(keep_per_principal)))
        self.batch_size = batch_size
        self.max_batches = max_batches
        self.on_batch = on_batch
        self.last_report: SweepReport | None = None

    async def sweep_once(self) -> SweepReport:
        """One pass over every rule; stops a rule when a batch erases nothing."""
        report = SweepReport()
        for name, rule in self.rules:
            erased = 0
            for _ in range(self.max_batches):
                keys = await self.stores.conversations.find_sweepable(rule, limit=self.batch_size)
                if not keys:
                    break
                report.batches += 1
                if self.on_batch is not None:
                    await self.on_batch(name, keys)
                progress = 0
                for key in keys:
                    if await self.stores.conversations.erase_if(key, rule):
                        progress += 1
                    else:
                        report.survived += 1
                erased += progress
                if progress == 0 or len(keys) < self.batch_size:
                    break
            setattr(report, name, getattr(report, name) + erased)
        self.last_report = report
        return report

    async def run_forever(
        self,
        interval: float,
        *,
        jitter: float = 0.1,
        stop: asyncio.Event | None = None,
    ) -> None:
        """Sweep every ``interval`` seconds (+-``jitter`` as a fraction, so replicas
        spread out) until ``stop`` is set. A failed sweep is logged with its traceback
        and recorded in ``last_report.errors``; the next one runs on schedule."""
        if interval <= 0 or not 0 <= jitter < 1:
            raise UsageError("interval must be positive and jitter in [0, 1)")
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                report = await self.sweep_once()
                if report.erased:
                    log.info("sweep erased %d conversations: %s", report.erased, report)
            except Exception as exc:
                log.exception("sweep failed")
                self.last_report = SweepReport(errors=[f"{type(exc).__name__}: {exc}"])
            delay = interval * (1 + random.uniform(-jitter, jitter))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)


__all__ = ["SweepReport", "Sweeper"]
