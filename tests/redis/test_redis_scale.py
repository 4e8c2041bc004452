"""Append and indexed reads cost the same at 100,000 messages as at 10, checked by the
commands the server runs (MONITOR shows every command a Lua script calls, with its
arguments), never by the clock."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
import pytest_asyncio

from agentstores import ConversationKey, Message
from agentstores_redis.stores import RedisStores
from tests.servers.valkey import ValkeyServer

from .conftest import with_prefix
from .helpers import commands_during, monitored

LONG = 100_000
SHORT = 10
BATCH = 1000


@pytest.fixture(scope="module")
def scale_server() -> Iterator[ValkeyServer]:
    with ValkeyServer() as server:
        yield server


def _messages(start: int, n: int) -> list[Message]:
    roles = ("user", "assistant", "tool")
    return [
        Message(f"m{i}", roles[i % 3], {"text": f"message {i}"}) for i in range(start, start + n)
    ]  # type: ignore[arg-type]


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def built(scale_server: ValkeyServer) -> AsyncIterator[tuple[RedisStores, dict[int, Any]]]:
    stores = RedisStores(with_prefix(scale_server.url))
    await stores.open()
    keys: dict[int, Any] = {}
    for n in (SHORT, LONG):
        key = ConversationKey("scale", f"n{n}")
        for start in range(0, n, BATCH):
            await stores.conversations.append_messages(
                key, "p", _messages(start, min(BATCH, n - start))
            )
        keys[n] = key
    yield stores, keys
    await stores.close()


OPS: dict[str, Callable[[RedisStores, ConversationKey, int], Awaitable[Any]]] = {
    "append": lambda s, k, n: s.conversations.append_messages(
        k, "p", [Message(f"extra-{uuid.uuid4().hex}", "user", {"text": "one more"})]
    ),
    "read index": lambda s, k, n: s.conversations.get_transcript(k, "p", index=n // 2),
    "read last": lambda s, k, n: s.conversations.get_transcript(k, "p", index=-1),
    "read user k": lambda s, k, n: s.conversations.get_transcript(
        k, "p", index=n // 6, speaker="user"
    ),
    "read assistant -2": lambda s, k, n: s.conversations.get_transcript(
        k, "p", index=-2, speaker="assistant"
    ),
    "recent": lambda s, k, n: s.conversations.recent(k, "p", 5),
    "tail": lambda s, k, n: s.conversations.tail(k, "p", 5),
    "first user message": lambda s, k, n: s.conversations.get_transcript(
        k, "p", index=0, speaker="user"
    ),
    "read_messages window": lambda s, k, n: s.conversations.read_messages(
        k, "p", start=n // 2, limit=3
    ),
    "info": lambda s, k, n: s.conversations.get_conversation(k, "p"),
}


@pytest.mark.parametrize("name", sorted(OPS))
async def test_cost_independent_of_length(
    name: str, built: tuple[RedisStores, dict[int, Any]], scale_server: ValkeyServer
) -> None:
    stores, keys = built
    op = OPS[name]
    shapes = {}
    for n in (SHORT, LONG):
        shapes[n] = await monitored(scale_server.port, lambda n=n: op(stores, keys[n], n))
    assert shapes[SHORT], "MONITOR saw nothing"
    assert shapes[LONG] == shapes[SHORT], (
        f"{name}: commands at {LONG} messages differ from those at {SHORT}:\n"
        f"{shapes[LONG]}\nvs\n{shapes[SHORT]}"
    )


async def test_time_range_reads_only_the_range(
    built: tuple[RedisStores, dict[int, Any]], scale_server: ValkeyServer
) -> None:
    """A time range maps to a seq range through the time index: the same commands for a
    one-batch range at 10 and at 100,000 messages."""
    stores, keys = built
    shapes = {}
    for n in (SHORT, LONG):
        last = (await stores.conversations.get_transcript(keys[n], "p", index=n - 1))[0]
        stamp: datetime = last.created_at

        async def op(k: ConversationKey = keys[n], at: datetime = stamp) -> None:
            rows = await stores.conversations.get_transcript(k, "p", time_range=(at, at), limit=3)
            assert len(rows) == 3

        shapes[n] = await monitored(scale_server.port, op)
    assert shapes[SHORT], "MONITOR saw nothing"
    assert shapes[LONG] == shapes[SHORT], f"{shapes[LONG]}\nvs\n{shapes[SHORT]}"


async def test_long_transcript_is_whole(built: tuple[RedisStores, dict[int, Any]]) -> None:
    stores, keys = built
    info = await stores.conversations.get_conversation(keys[LONG], "p")
    assert info is not None and info.message_count >= LONG
    row = await stores.conversations.get_transcript(keys[LONG], "p", index=LONG - 1)
    assert row[0].id == f"m{LONG - 1}"
    users = await stores.conversations.get_transcript(keys[LONG], "p", index=7, speaker="user")
    assert users[0].id == "m21" and users[0].index == 7


WHOLE = {b"hgetall", b"hkeys", b"hvals", b"smembers", b"lrange", b"zrange", b"zrevrange"}
"""Commands that read a whole collection when asked for positions 0 to -1 (or always)."""
EVERYTHING = {b"hgetall", b"hkeys", b"hvals", b"smembers"}


async def test_an_append_reads_no_whole_collection(
    built: tuple[RedisStores, dict[int, Any]], scale_server: ValkeyServer
) -> None:
    """The command shapes alone would not show a script reading a whole sorted set at
    every append: ``ZRANGE key 0 -1`` has the same shape at any length."""
    stores, keys = built
    ran = await commands_during(scale_server.port, lambda: OPS["append"](stores, keys[LONG], LONG))
    whole = [c for c in ran if c[0] in WHOLE and (c[0] in EVERYTHING or c[2:4] == [b"0", b"-1"])]
    assert ran and not whole, f"an append at {LONG} messages read whole collections: {whole}"
