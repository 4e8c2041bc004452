"""memory:// bundles of one name share records, each with its own clock and tombstone TTL."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from agentstores.errors import ErasedError
from agentstores.keys import ConversationKey
from agentstores.memory.stores import EphemeralStoreWarning, MemoryStores

START = datetime(2001, 2, 3, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _quiet_memory_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        yield


async def test_bundles_share_records_under_their_own_clock_and_ttl() -> None:
    url = f"memory://options-{uuid.uuid4().hex}"
    key = ConversationKey("t", "s")
    plain = MemoryStores(url)
    at = START
    short = MemoryStores(url, clock=lambda: at, tombstone_ttl=timedelta(minutes=5))
    async with plain, short:
        await plain.state.save(key, "p", {"n": 1})
        assert await short.state.load(key, "p") == {"n": 1}, "the records are not shared"
        assert await short.now() == START
        assert await plain.now() > START + timedelta(days=3650), "the clock leaked across"
        assert await short.conversations.delete(key, "p")
        at = START + timedelta(minutes=5) - timedelta(microseconds=1)
        with pytest.raises(ErasedError):
            await short.state.save(key, "q", {"n": 2})
        at = START + timedelta(minutes=5)
        await short.state.save(key, "q", {"n": 2})
        assert await plain.state.load(key, "q") == {"n": 2}


def test_a_bundle_without_options_sees_the_shared_defaults() -> None:
    url = f"memory://options-{uuid.uuid4().hex}"
    first = MemoryStores(url, tombstone_ttl=timedelta(seconds=1))
    later = MemoryStores(url)
    assert first.data.tombstone_ttl == timedelta(seconds=1)
    assert later.data.tombstone_ttl == timedelta(days=30), "options of one bundle leaked"
