"""Fixtures for the protocol tests: fresh in-memory bundles on a clock the test moves."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest

from agentstores.keys import ConversationKey
from agentstores.memory.stores import EphemeralStoreWarning, MemoryStores


class ManualClock:
    """A store clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def memory_url() -> str:
    return f"memory://protocol-{uuid.uuid4().hex}"


@pytest.fixture
def bundle(memory_url: str, clock: ManualClock) -> Callable[[], MemoryStores]:
    """Bundles sharing one in-memory backend (like replicas sharing one database)."""
    made: list[MemoryStores] = []

    def make() -> MemoryStores:
        stores = MemoryStores(memory_url, clock=clock, fresh=not made)
        made.append(stores)
        return stores

    return make


@pytest.fixture
async def stores(bundle: Callable[[], MemoryStores]) -> AsyncIterator[MemoryStores]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        async with bundle() as s:
            yield s


@pytest.fixture
def key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}")
