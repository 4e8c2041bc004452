"""The cross-slot indexes (listing and sweeping) are hints: a stale entry is repaired or
dropped, never returned as data; a lost index step is rebuilt by repair_indexes()."""

from __future__ import annotations

import uuid
from datetime import timedelta

from agentstores import ConversationKey, IdleFor, Message
from agentstores_redis.stores import RedisStores


async def _conversations(s: RedisStores, tenant: str, owner: str, names: list[str]) -> None:
    for name in names:
        await s.conversations.append_messages(
            ConversationKey(tenant, name), owner, [Message("m", "user", name)]
        )


async def test_stale_entries_are_repaired_not_returned(url: str) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    async with RedisStores(url) as s:
        await _conversations(s, tenant, "p", ["c1", "c2", "c3"])
        await _conversations(s, tenant, "q", ["theirs"])
        await s.conversations.delete(ConversationKey(tenant, "c2"), "p")
        await _conversations(s, tenant, "p", ["c4"])
        ix = s.keys.owner_index(tenant, "p")
        # a stale score, a ghost with no conversation, a foreign and an erased conversation
        await s.client.command(ix, "ZADD", ix, 1, "c1")
        await s.client.command(ix, "ZADD", ix, 9e15, "ghost")
        await s.client.command(ix, "ZADD", ix, 8e15, "theirs")
        await s.client.command(ix, "ZADD", ix, 7e15, "c2")
        page = await s.conversations.list_conversations(tenant, "p", limit=2)
        assert [i.key.session_id for i in page.items] == ["c4", "c3"]
        assert page.next_cursor is not None
        rest = await s.conversations.list_conversations(tenant, "p", cursor=page.next_cursor)
        assert [i.key.session_id for i in rest.items] == ["c1"]
        assert rest.next_cursor is None
        info = await s.conversations.get_conversation(ConversationKey(tenant, "c1"), "p")
        assert info is not None and rest.items[0] == info
        members = await s.client.command(ix, "ZRANGE", ix, 0, -1, "WITHSCORES")
        names = members[0::2]
        assert b"ghost" not in names and b"theirs" not in names and b"c2" not in names
        scores = dict(zip(names, members[1::2], strict=True))
        assert int(float(scores[b"c1"])) != 1, "the stale score was not repaired"
        await s.purge()


async def test_lost_index_step_is_rebuilt(url: str) -> None:
    """What a process killed between a write and its index step leaves: the conversation
    is missing from listings and sweeps until repair_indexes()."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    async with RedisStores(url) as s:
        await _conversations(s, tenant, "p", ["c1"])
        key = ConversationKey(tenant, "c1")
        ix = s.keys.owner_index(tenant, "p")
        idle = s.keys.idle(s.keys.shard_of(key))
        await s.client.command(ix, "DEL", ix)
        await s.client.command(idle, "ZREM", idle, s.keys.member(key))
        assert (await s.conversations.list_conversations(tenant, "p")).items == []
        assert await s.repair_indexes() >= 1
        page = await s.conversations.list_conversations(tenant, "p")
        assert [i.key for i in page.items] == [key]
        found = await s.conversations.find_sweepable(
            IdleFor(timedelta(microseconds=1)), limit=10_000
        )
        assert key in found
        await s.purge()
