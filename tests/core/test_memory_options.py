"""memory:// bundles of one name share records, each with its own clock and tombstone TTL."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from agentstores.errors import ErasedError, UsageError
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


@pytest.mark.parametrize(
    ("query", "options"),
    [
        pytest.param("", {"tombstone_ttl": 0}, id="0"),
        pytest.param("", {"tombstone_ttl": timedelta(0)}, id="zero-timedelta"),
        pytest.param("", {"tombstone_ttl": timedelta(seconds=-1)}, id="minus-1s"),
        pytest.param("", {"tombstone_ttl": timedelta(days=36_526)}, id="100y+1d"),
        pytest.param("", {"tombstone_ttl": True}, id="bool"),
        pytest.param("", {"tombstone_ttl": "soon"}, id="text"),
        pytest.param("?tombstone_ttl=soon", {}, id="url-query"),  # a keyword only here
    ],
)
def test_a_bad_tombstone_ttl_is_refused_by_name_when_the_bundle_is_made(
    query: str, options: dict[str, object]
) -> None:
    """Before, a zero was silently 30 days, a negative or huge one was taken, and a value
    not a timedelta failed only at the first erase."""
    url = f"memory://options-{uuid.uuid4().hex}"
    with pytest.raises(UsageError, match="tombstone_ttl") as refused:
        MemoryStores(url + query, **options)  # type: ignore[arg-type]
    assert refused.value.context["option"] == "tombstone_ttl"


@pytest.mark.parametrize("ttl", [timedelta(days=36_525), timedelta(seconds=1)], ids=["100y", "1s"])
async def test_a_tombstone_ttl_up_to_100_years_is_kept(ttl: timedelta) -> None:
    url = f"memory://options-{uuid.uuid4().hex}"
    key = ConversationKey("t", "s")
    at = START
    async with MemoryStores(url, clock=lambda: at, tombstone_ttl=ttl) as stores:
        assert stores.data.tombstone_ttl == ttl
        await stores.state.save(key, "p", {"n": 1})
        assert await stores.conversations.delete(key, "p")
        at = START + ttl - timedelta(microseconds=1)
        with pytest.raises(ErasedError) as erased:
            await stores.state.save(key, "p", {"n": 2})
        assert erased.value.until == START + ttl
        at = START + ttl
        await stores.state.save(key, "p", {"n": 3})
