"""The cross-slot indexes (listing and sweeping) are hints: a stale entry is repaired or
dropped, never returned as data; a lost index step is rebuilt by repair_indexes()."""

from __future__ import annotations

import uuid
from datetime import timedelta

from agentstores import ConversationKey, IdleFor, Message, OverCap
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


async def test_a_repair_of_an_entry_moved_since_it_was_read_changes_nothing(url: str) -> None:
    """A listing saw a member's score, and a write moved it before the listing's repair
    ran: the repair (a set or a removal) must find the score it saw, else leave the
    entry as the write left it (a live conversation would drop out of listings)."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    async with RedisStores(url) as s:
        await _conversations(s, tenant, "p", ["c1"])
        ix = s.keys.owner_index(tenant, "p")
        seen = int(float(await s.client.command(ix, "ZSCORE", ix, "c1")))
        key = ConversationKey(tenant, "c1")
        await s.conversations.append_messages(key, "p", [Message("m2", "user", 2)])  # moves it
        moved = int(float(await s.client.command(ix, "ZSCORE", ix, "c1")))
        assert moved != seen
        index = s.conversations.indexes  # type: ignore[attr-defined]
        await index._repair([(ix, "c1", str(seen), None), (ix, "c1", str(seen), "1")])
        assert int(float(await s.client.command(ix, "ZSCORE", ix, "c1"))) == moved
        page = await s.conversations.list_conversations(tenant, "p")
        assert [i.key.session_id for i in page.items] == ["c1"]
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


async def _registered(s: RedisStores, tenant: str, owner: str) -> bool:
    registry = s.keys.owner_registry(s.keys.owner_shard(tenant, owner))
    members = await s.client.command(registry, "SMEMBERS", registry)
    return s.keys.owner_name(tenant, owner).encode() in members


async def test_an_owner_with_no_conversation_left_leaves_no_trace(url: str) -> None:
    """Erasing an owner's last conversation (by them or by the sweeper) removes their
    name from the owner registry; their index went with its last member."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    async with RedisStores(url) as s:
        await _conversations(s, tenant, "p", ["c1", "c2"])
        await _conversations(s, tenant, "q", ["d1"])
        assert await _registered(s, tenant, "p") and await _registered(s, tenant, "q")
        assert await s.conversations.delete(ConversationKey(tenant, "c1"), "p")
        assert await _registered(s, tenant, "p")
        assert await s.conversations.delete(ConversationKey(tenant, "c2"), "p")
        assert not await _registered(s, tenant, "p")
        ix = s.keys.owner_index(tenant, "p")
        assert not await s.client.command(ix, "EXISTS", ix)
        assert await s.conversations.erase_if(ConversationKey(tenant, "d1"), OverCap(0))
        assert not await _registered(s, tenant, "q")
        await _conversations(s, tenant, "p", ["c3"])
        assert await _registered(s, tenant, "p"), "a new conversation registers them again"
        await s.purge()


async def test_the_over_cap_sweep_removes_a_name_left_without_conversations(url: str) -> None:
    """A name an earlier build (or a lost cleanup step) left in the registry goes when the
    over-cap sweep finds the owner has no conversation."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    async with RedisStores(url) as s:
        registry = s.keys.owner_registry(s.keys.owner_shard(tenant, "gone"))
        await s.client.command(registry, "SADD", registry, s.keys.owner_name(tenant, "gone"))
        assert await _registered(s, tenant, "gone")
        await s.conversations.find_sweepable(OverCap(1), limit=10)
        assert not await _registered(s, tenant, "gone")
        await s.purge()
