"""The real-time lifetime checks on a loaded machine: an attempt whose checks ran past
the lifetime judges nothing and is run again with a longer one."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import ClassVar

import pytest

from agentstores.stores import Stores
from agentstores_contract import BackendUnderTest, lifetimes

pytestmark = pytest.mark.filterwarnings("ignore::agentstores.errors.EphemeralStoreWarning")


class Stalls(lifetimes.Lifetime):
    """Its checks outlast the lifetime at the first attempt only; a late ``after`` raises
    the way a tombstone check does once late writes landed past the TTL."""

    promise = "lifetimes.tombstone"
    lifetimes_seen: ClassVar[list[timedelta]] = []

    async def start(self, stores: Stores) -> None:
        self.lifetimes_seen.append(self.lifetime)
        self.alive_until = self.dead_from = await stores.now() + self.lifetime

    async def before(self, stores: Stores) -> list[str]:
        if len(self.lifetimes_seen) == 1:
            await asyncio.sleep(self.lifetime.total_seconds())
        return []

    async def after(self, stores: Stores) -> list[str]:
        if len(self.lifetimes_seen) == 1:
            raise RuntimeError("judged a lifetime whose checks ran past it")
        return []


def memory_backend() -> BackendUnderTest:
    """A memory backend on the real clock (it has no clock set), so the real-time path runs."""
    return BackendUnderTest.from_url(f"memory://lifetimes-{uuid.uuid4().hex}")


def test_a_slow_attempt_is_run_again_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    short = (timedelta(milliseconds=200), timedelta(milliseconds=400))
    monkeypatch.setattr(lifetimes, "LIFETIMES", [Stalls])
    monkeypatch.setattr(lifetimes, "REAL_LIFETIMES", short)
    Stalls.lifetimes_seen = []
    verdicts = asyncio.run(lifetimes._real_time_verdicts(memory_backend()))
    assert Stalls.lifetimes_seen == list(short)
    assert verdicts == {"lifetimes.tombstone": []}


def test_slow_at_every_attempt_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifetimes, "LIFETIMES", [Stalls])
    monkeypatch.setattr(lifetimes, "REAL_LIFETIMES", (timedelta(milliseconds=200),))
    Stalls.lifetimes_seen = []
    verdicts = asyncio.run(lifetimes._real_time_verdicts(memory_backend()))
    assert verdicts == {"lifetimes.tombstone": [lifetimes.SLOW]}
