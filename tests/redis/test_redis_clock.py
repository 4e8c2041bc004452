"""The transcript's times never go back when the server's clock does (a failover to a
replica whose clock is behind, a clock stepped back by hand): an append keeps the
conversation's ``updated_at``, and stamps its messages, at least as late as the latest
time it has stored. Planted here by moving the stored times an hour ahead."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import redis.asyncio as aioredis

from agentstores import ConversationKey, Message
from agentstores_redis.stores import RedisStores
from tests.servers.valkey import ValkeyServer

from .conftest import with_prefix

pytestmark = pytest.mark.asyncio


async def test_an_append_after_the_clock_went_back_keeps_times_moving_forward(
    valkey_server: ValkeyServer,
) -> None:
    url = with_prefix(valkey_server.url)
    key = ConversationKey("clock", uuid.uuid4().hex)
    async with RedisStores(url) as stores:
        try:
            conv = stores.conversations
            await conv.append_messages(key, "p", [Message("m0", "user", "before")])
            info = await conv.get_conversation(key, "p")
            assert info is not None
            ahead = info.updated_at + timedelta(hours=1)
            ahead_us = str(int(ahead.timestamp() * 1_000_000))
            meta = conv._key_names(key).meta  # type: ignore[attr-defined]
            raw = aioredis.Redis(host="127.0.0.1", port=valkey_server.port)
            try:  # as if the stored times came from a clock an hour ahead of this one
                await raw.hset(meta, mapping={"updated_at": ahead_us, "last_created": ahead_us})
            finally:
                await raw.aclose()
            await conv.append_messages(key, "p", [Message("m1", "assistant", "after")])
            info = await conv.get_conversation(key, "p")
            assert info is not None and info.updated_at >= ahead, (
                f"updated_at went back to {info.updated_at} from {ahead}"
            )
            last = (await conv.read_messages(key, "p"))[-1]
            assert last.id == "m1" and last.created_at >= ahead, (
                f"m1 was stamped {last.created_at}, before {ahead}"
            )
        finally:
            await stores.purge()
