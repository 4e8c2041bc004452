"""recent(), tail() and a speaker's message by index are one MULTI/EXEC of plain reads
(no script), and the read rule is judged on that same snapshot: the header's fields and
the server clock come back with the records."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from agentstores import ConversationKey, Message
from agentstores_redis.client import NotSent
from agentstores_redis.stores import RedisStores
from tests.servers.valkey import ValkeyCluster, ValkeyServer

from .conftest import with_prefix
from .helpers import monitored

TURNS = [
    Message("u0", "user", "q0"),
    Message("a0", "assistant", "r0"),
    Message("t0", "tool", "x"),
    Message("u1", "user", "q1"),
]

PLAIN = [(b"multi", 0), (b"hmget", 5), (b"time", 0)]
"""What every plain read starts with: the header fields of the read rule and the clock."""


async def test_hot_reads_are_one_transaction_of_plain_commands(
    valkey_server: ValkeyServer,
) -> None:
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "c")
    async with RedisStores(with_prefix(valkey_server.url)) as s:
        conv = s.conversations
        await conv.append_messages(key, "p", TURNS)
        recent = await monitored(valkey_server.port, lambda: conv.recent(key, "p", 3))
        assert recent == [*PLAIN, (b"zrange", 4), (b"zrange", 4), (b"exec", 0)]
        first = await monitored(
            valkey_server.port, lambda: conv.get_transcript(key, "p", index=0, speaker="user")
        )
        assert first == [*PLAIN, (b"zrange", 4), (b"exec", 0)]
        last = await monitored(
            valkey_server.port,
            lambda: conv.get_transcript(key, "p", index=-1, speaker="assistant"),
        )
        assert last == [*PLAIN, (b"zrange", 4), (b"zcard", 1), (b"exec", 0)]
        tail = await monitored(valkey_server.port, lambda: conv.tail(key, "p", 3))
        assert tail == [
            (b"multi", 0),
            (b"hgetall", 1),
            (b"time", 0),
            (b"hgetall", 1),
            (b"exists", 1),
            *[(b"zrange", 4)] * 3,
            (b"exec", 0),
        ]
        await s.purge()


async def test_tail_is_what_the_composed_reads_give(url: str) -> None:
    """The one-transaction tail equals get_conversation beside read_messages from
    ``count - limit``, at every limit (0, within one role, across roles, past the
    start), with metadata, a title, a status and a share in the info."""
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "c")
    async with RedisStores(url) as s:
        conv = s.conversations
        assert await conv.tail(key, "p", 3) is None
        await conv.append_messages(
            key, "p", TURNS, title="t", metadata={"k": {"v": [1]}}, last_turn_status="complete"
        )
        await conv.append_messages(key, "p", [Message("t1", "tool", {"r": 1})])
        await conv.append_messages(key, "p", [Message("x0", "system", "s")])
        await conv.share(key, "p", "q")
        info = await conv.get_conversation(key, "p")
        assert info is not None and info.message_count == 6
        for limit in (0, 1, 2, 3, 6, 7, 1000):
            got = await conv.tail(key, "p", limit)
            assert got is not None
            assert got.info == info
            start = max(0, info.message_count - limit)
            assert got.messages == await conv.read_messages(key, "p", start=start)
        shared = await conv.tail(key, "q", 2)
        assert shared is not None and [m.id for m in shared.messages] == ["t1", "x0"]
        assert shared.info == await conv.get_conversation(key, "q")
        await conv.truncate(key, "p", "u0", cut="before")
        emptied = await conv.tail(key, "p", 5)
        assert emptied is not None and emptied.messages == []
        assert emptied.info.message_count == 0 and emptied.info.tail_message_id is None
        await s.purge()


async def test_answers_match_the_rule(url: str) -> None:
    """Owner, shared, stranger, revoked and erased, through the plain path."""
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "c")
    async with RedisStores(url) as s:
        conv = s.conversations

        async def seen(who: str) -> tuple[list[str], list[str], list[str], list[str]]:
            recent = [m.id for m in await conv.recent(key, who, 3)]
            tail = await conv.tail(key, who, 2)
            assert (tail is None) == (await conv.get_conversation(key, who) is None)
            tailed = [] if tail is None else [m.id for m in tail.messages]
            first = [t.id for t in await conv.get_transcript(key, who, index=0, speaker="user")]
            last = [
                (t.id, t.index)
                for t in await conv.get_transcript(key, who, index=-1, speaker="assistant")
            ]
            return recent, first, [f"{i}@{n}" for i, n in last], tailed

        await conv.append_messages(key, "p", TURNS)
        visible = (["u0", "a0", "u1"], ["u0"], ["a0@0"], ["t0", "u1"])
        absent: tuple[list[str], ...] = ([], [], [], [])
        assert await seen("p") == visible
        assert await seen("q") == absent
        await conv.share(key, "p", "q")
        assert await seen("q") == visible
        await conv.unshare(key, "p", "q")
        assert await seen("q") == absent
        await conv.delete(key, "p")
        assert await seen("p") == absent
        await s.purge()


async def test_past_the_drop_deadline_a_conversation_reads_as_absent(url: str) -> None:
    """A temporary conversation is dead from its drop deadline on, by the server clock,
    even while its keys have not expired yet (they go on the next whole millisecond)."""
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "c")
    async with RedisStores(url) as s:
        conv = s.conversations
        expires = await s.now() + timedelta(hours=1)
        await conv.append_messages(key, "p", TURNS, expires_at=expires)
        assert [m.id for m in await conv.recent(key, "p", 1)] == ["u1"]
        names = s.keys.conv(key)
        now_us = int((await s.now()).timestamp() * 1_000_000)
        await s.client.command(names.header, "HSET", names.header, "drop_at", now_us - 1)
        assert await conv.recent(key, "p", 5) == []
        assert await conv.get_transcript(key, "p", index=0, speaker="user") == []
        assert await conv.get_transcript(key, "p", index=-1, speaker="assistant") == []
        assert await conv.tail(key, "p", 5) is None
        assert await conv.get_conversation(key, "p") is None
        assert await s.client.command(names.header, "EXISTS", names.user_records) == 1
        await s.purge()


async def test_replies_taken_from_the_reader_equal_read_responses(
    valkey_server: ValkeyServer,
) -> None:
    """A transaction takes the replies already buffered straight from the hiredis reader:
    they must be what ``read_response`` gives, error replies (top-level and inside
    ``EXEC``) included."""
    from agentstores_redis.client import _hiredis_reader, _pipeline, packed

    async with RedisStores(with_prefix(valkey_server.url)) as s:
        key = s.keys.prefix + ":{t}:plain"
        await s.client.command(key, "SET", key, "text")
        cmds: list[tuple[str | int, ...]] = [
            ("MULTI",),
            ("GET", key),
            ("ZRANGE", key, 0, -1),  # WRONGTYPE, inside EXEC's reply
            ("TIME",),
            ("EXEC",),
            ("NOSUCHCOMMAND",),  # a top-level error reply
            ("HMGET", key + ":none", "a", "b"),
        ]
        conn, release = await s.client._connect(key)
        try:
            assert _hiredis_reader(conn) is not None, "tests-redis installs the hiredis extra"
            fast = await _pipeline(conn, packed(cmds), True)
            plain = await _pipeline(conn, packed(cmds), False)
        finally:
            await release(conn)

        def shape(reply: object) -> object:
            if isinstance(reply, Exception):
                return (type(reply), str(reply))
            if isinstance(reply, list):
                return [shape(r) for r in reply]
            return reply

        fast[4][2] = plain[4][2] = None  # TIME moves
        assert [shape(r) for r in fast] == [shape(r) for r in plain]
        assert isinstance(fast[4][1], Exception) and isinstance(fast[5], Exception)
        assert fast[6] == [None, None]
        await s.client.command(key, "DEL", key)
        await s.purge()


async def test_a_refused_command_fails_the_transaction_with_its_own_error(
    valkey_server: ValkeyServer,
) -> None:
    from redis.exceptions import ResponseError

    async with RedisStores(with_prefix(valkey_server.url)) as s:
        key = s.keys.prefix + ":{t}:plain"
        with pytest.raises(ResponseError, match="wrong number of arguments"):
            await s.client.transaction(key, [("GET", key), ("ZRANGE", key)])
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await s.client.command(key, "SET", key, "text")
            await s.client.transaction(key, [("ZRANGE", key, 0, -1)])
        assert await s.client.transaction(key, [("GET", key)]) == [b"text"]
        await s.client.command(key, "DEL", key)


async def test_a_key_of_another_node_is_a_redirection_not_an_answer(
    valkey_cluster: ValkeyCluster,
) -> None:
    """On a cluster every key of a transaction must live on its routing key's node; one
    that does not is refused with MOVED, sent once more after a topology refresh, then
    reported as not sent."""
    async with RedisStores(with_prefix(valkey_cluster.url)) as s:
        here = s.keys.prefix + ":{a}:x"
        node = s.client._node_for(here)
        other = next(
            f"{s.keys.prefix}:{{{i}}}:x"
            for i in range(1000)
            if s.client._node_for(f"{s.keys.prefix}:{{{i}}}:x") is not node
        )
        with pytest.raises(NotSent, match="redirection"):
            await s.client.transaction(here, [("GET", other)])
        assert await s.client.transaction(here, [("GET", here)]) == [None]
