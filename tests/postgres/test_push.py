"""Push: the writes publish wake-ups (NOTIFY, at commit), each bundle listens on a
connection of its own, and ``wakeups.remote`` says whether it really listens."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import asyncpg

from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.protocol import LeaseConfig, follow, start_turn
from agentstores.protocol.follow import FollowEnd, FollowUpdate
from agentstores_postgres.listener import CHANNEL, digest
from agentstores_postgres.stores import PostgresStores

from .conftest import PgServer

P = "owner"
PUSH = "&push=true"
"""Push is off unless the URL turns it on."""
FAR = 3600.0
"""Polls this far apart never come within a test: only a wake-up makes a follower read."""
PATIENCE = 10.0
LONG = LeaseConfig(heartbeat_interval=20, dead_after=60)


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


async def _eventually(check: Callable[[], bool], within: float = PATIENCE) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "not within the patience"
        await asyncio.sleep(0.02)


async def _heard(admin_url: str, write: Callable[[], Awaitable[object]]) -> list[str]:
    """The payloads a plain listener hears while ``write`` runs."""
    got: list[str] = []
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.add_listener(CHANNEL, lambda *args: got.append(args[3]))
        await write()
        await conn.fetchval("SELECT 1")  # notifications sent before this answer arrive first
        await asyncio.sleep(0.1)
    finally:
        await conn.close()
    return got


async def test_each_write_a_follower_cares_about_publishes_the_keys_digest(pg: PgServer) -> None:
    key = _key()
    async with PostgresStores(pg.url + PUSH) as stores:
        mine = digest(stores.schema, key)
        sup, rec, conv = stores.supervision, stores.recording, stores.conversations

        async def writes() -> None:
            assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "m", 1))
            assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "m", 1))
            await rec.put(key, P, RecordedEvent(0, {"text": "a"}, "m", 1))
            await conv.append_messages(key, P, [Message("u1", "user", "q")], epoch=1)
            await conv.append_messages(
                key, P, [Message("t1", "tool", "x")], expected_tail="u1", epoch=1
            )
            assert await rec.delete(key, P, "m", epoch=1)
            assert await sup.delete(key, P, "m", 1)
            assert await conv.delete(key, P)

        assert await _heard(pg.admin_url, writes) == [mine] * 8

        async def refused() -> None:  # nothing written: nothing published
            assert not await sup.compare_and_swap(key, P, 7, SupervisionRow("running", "m", 9))
            assert not await sup.delete(key, P, "m", 1)

        assert await _heard(pg.admin_url, refused) == []


async def test_payloads_carry_no_key_and_differ_by_schema_and_key() -> None:
    a, b = ConversationKey("tenant", "session"), ConversationKey("tenant", "other")
    assert len(digest("s1", a)) == 16 and "tenant" not in digest("s1", a)
    assert len({digest("s1", a), digest("s2", a), digest("s1", b)}) == 3
    assert digest("s", ConversationKey("ab", "c")) != digest("s", ConversationKey("a", "bc"))


async def test_two_replicas_wake_each_others_followers(pg: PgServer) -> None:
    """A follower whose polls never come gets another bundle's writes: only the pushed
    wake-up can make it read."""
    key = _key()
    async with PostgresStores(pg.url + PUSH) as producer, PostgresStores(pg.url + PUSH) as reader:
        assert producer.wakeups.remote and reader.wakeups.remote
        lease = await start_turn(
            producer,
            key,
            P,
            "m",
            None,
            user_message=Message("u1", "user", "q"),
            lease_config=LONG,
        )
        await lease.record(3, {"text": "abc"})
        events = follow(reader, key, P, poll=FAR, safety_poll=FAR, dead_after=60)
        first = await asyncio.wait_for(anext(events), PATIENCE)
        assert isinstance(first, FollowUpdate) and first.text == "abc"
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        await asyncio.sleep(0.2)
        await lease.record(6, {"text": "abcdef"})
        second = await waiting
        assert isinstance(second, FollowUpdate) and second.text == "abcdef"
        await lease.append(
            [Message("m", "assistant", "abcdef")],
            expected_tail="u1",
            last_turn_status="complete",
        )
        await lease.seal("done")
        end = await asyncio.wait_for(anext(events), PATIENCE)
        assert isinstance(end, FollowEnd) and end.verdict == "done"
        await events.aclose()


async def test_a_killed_listener_falls_back_to_polling_and_comes_back(pg: PgServer) -> None:
    key = _key()
    async with PostgresStores(pg.url + PUSH) as producer, PostgresStores(pg.url + PUSH) as reader:
        listener = reader.listener
        assert listener is not None and reader.wakeups.remote
        before, pid = listener.connects, listener.server_pid
        lease = await start_turn(
            producer,
            key,
            P,
            "m",
            None,
            user_message=Message("u1", "user", "q"),
            lease_config=LONG,
        )
        await lease.record(1, {"text": "a"})
        # polls 0.2 s apart without push, never with it
        events = follow(reader, key, P, poll=0.2, safety_poll=FAR, dead_after=60)
        assert (await asyncio.wait_for(anext(events), PATIENCE)).index == 1  # type: ignore[union-attr]
        # the reconnect waits for the test's word, so the time without push is seen
        gate = asyncio.Event()
        reconnect = listener._connect

        async def gated() -> None:
            await gate.wait()
            await reconnect()

        listener._connect = gated  # type: ignore[method-assign]
        admin = await asyncpg.connect(pg.admin_url)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
            await _eventually(lambda: not reader.wakeups.remote)
            # a write while nobody listens reaches the follower by polling
            waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
            await lease.record(2, {"text": "ab"})
            got = await waiting
            assert isinstance(got, FollowUpdate) and got.text == "ab"
            assert not reader.wakeups.remote
            gate.set()
            await _eventually(lambda: reader.wakeups.remote)
            assert listener.connects > before and listener.server_pid not in (None, pid)
            # listening again: the far safety poll never comes, the push does
            waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
            await asyncio.sleep(0.3)
            await lease.record(3, {"text": "abc"})
            got = await waiting
            assert isinstance(got, FollowUpdate) and got.text == "abc"
        finally:
            await admin.close()
            await events.aclose()


async def test_push_off_by_default_or_false_neither_listens_nor_publishes(pg: PgServer) -> None:
    for url in (pg.url, pg.url + "&push=false"):
        key = _key()
        async with PostgresStores(url) as quiet:
            assert quiet.listener is None and not quiet.wakeups.remote

            async def write(quiet: PostgresStores = quiet, key: ConversationKey = key) -> None:
                assert await quiet.supervision.compare_and_swap(
                    key, P, None, SupervisionRow("running", "m", 1)
                )
                assert await quiet.supervision.compare_and_swap(
                    key, P, 1, SupervisionRow("running", "m", 1)
                )
                await quiet.recording.put(key, P, RecordedEvent(0, {"text": "a"}, "m", 1))

            assert await _heard(pg.admin_url, write) == [], url
    async with PostgresStores(pg.url + PUSH, pgbouncer=True) as pooled:
        assert pooled.listener is None and not pooled.wakeups.remote


async def test_closing_stops_listening(pg: PgServer) -> None:
    stores = PostgresStores(pg.url + PUSH)
    async with stores:
        listener = stores.listener
        assert listener is not None and stores.wakeups.remote
        pid = listener.server_pid
    assert stores.listener is None and not stores.wakeups.remote
    admin = await asyncpg.connect(pg.admin_url)
    try:
        assert not await admin.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid
        )
    finally:
        await admin.close()
