"""Erasure leaves nothing of an owner behind: once their last conversation is erased (by
them or by the sweeper), no object's name or body carries their id, and their listing
prefix ``o/<sha(tenant, owner)>/`` is empty. The tombstone it leaves lasts
``tombstone_ttl``, checked when the bundle is made (above zero, at most 100 years)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from agentstores.errors import ErasedError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.stores import OverCap
from agentstores_s3 import S3Stores
from tests.tombstone_ttls import REFUSED


def _traces(stores: S3Stores, owner: str) -> list[str]:
    """Every object whose name or body holds ``owner``."""
    io = stores.root.io
    found = []
    for name in io.list(""):
        got = io.get(name)
        if owner in name or (got is not None and owner.encode() in got[0]):
            found.append(name)
    return found


def test_an_owner_with_no_conversation_left_leaves_no_trace(url: str) -> None:
    async def main() -> None:
        tenant, owner = f"t-{uuid.uuid4().hex[:8]}", f"owner-{uuid.uuid4().hex}"
        a, b = ConversationKey(tenant, "a"), ConversationKey(tenant, "b")
        async with S3Stores(url) as stores:
            for key in (a, b):
                await stores.conversations.append_messages(key, owner, [Message.user("hi")])
            assert await asyncio.to_thread(_traces, stores, owner)
            assert await stores.conversations.delete(a, owner)
            assert await stores.conversations.erase_if(b, OverCap(0))
            assert await asyncio.to_thread(_traces, stores, owner) == []
            listing = stores.root.owner_dir(tenant, owner)
            assert await asyncio.to_thread(stores.root.io.list, listing) == []

    asyncio.run(main())


def test_an_erasure_whose_sweep_failed_is_finished_by_asking_again(url: str) -> None:
    """The tombstone is written, then sweeping the conversation's objects fails (a network
    fault): the call fails, and deleting the key again sweeps what was left."""

    async def main() -> None:
        async with S3Stores(url) as stores:
            key = ConversationKey("erasure", uuid.uuid4().hex)
            messages = [Message(f"m{i}", "user", "x" * 100) for i in range(40)]
            await stores.conversations.append_messages(key, "p", messages)
            await stores.state.save(key, "p", {"secret": "s"})
            io, kdir = stores.root.io, stores.root.key_dir(key)
            delete_many = io.delete_many

            def failing(names: list[str]) -> None:
                raise OSError("the network went away")

            io.delete_many = failing  # type: ignore[method-assign]
            try:
                await stores.conversations.delete(key, "p")
            except Exception:
                pass
            else:
                raise AssertionError("the failed sweep was reported as a success")
            io.delete_many = delete_many  # type: ignore[method-assign]
            assert len(io.list(kdir)) > 1, "nothing was left to sweep"
            assert await stores.conversations.delete(key, "p") is False  # erased already
            assert io.list(kdir) == [kdir + "h"], "asking again did not finish the sweep"

    asyncio.run(main())


@pytest.mark.parametrize(
    ("query", "options"),
    REFUSED,
)
def test_a_bad_tombstone_ttl_is_refused_by_name_when_the_bundle_is_made(
    query: str, options: dict[str, object]
) -> None:
    """Before, a negative timedelta and any large one were taken, and ``True`` was 1 s."""
    with pytest.raises(UsageError, match="tombstone_ttl") as refused:
        S3Stores(f"s3://bucket/p{query}", **options)
    assert refused.value.context["option"] == "tombstone_ttl"


@pytest.mark.parametrize(
    ("query", "options", "ttl"),
    [
        pytest.param("&tombstone_ttl=3155760000", {}, timedelta(days=36_525), id="url-100y"),
        pytest.param("", {"tombstone_ttl": timedelta(seconds=1)}, timedelta(seconds=1), id="1s"),
    ],
)
def test_a_tombstone_ttl_up_to_100_years_is_kept(
    url: str, query: str, options: dict[str, object], ttl: timedelta
) -> None:
    """A late write is refused until the erase time plus ``ttl`` (a clock the test sets)."""
    erased_at = datetime(2030, 1, 1, tzinfo=UTC)
    now = erased_at

    async def main() -> None:
        nonlocal now
        key = ConversationKey("erasure", uuid.uuid4().hex)
        async with S3Stores(url + query, clock=lambda: now, **options) as stores:
            assert stores.root.tombstone_ttl == ttl
            await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
            assert await stores.conversations.delete(key, "p")
            now = erased_at + ttl - timedelta(microseconds=1)
            with pytest.raises(ErasedError) as erased:
                await stores.conversations.append_messages(key, "p", [Message("n", "user", "x")])
            assert erased.value.until == erased_at + ttl
            now = erased_at + ttl
            await stores.conversations.append_messages(key, "p", [Message("n", "user", "new")])

    asyncio.run(main())
