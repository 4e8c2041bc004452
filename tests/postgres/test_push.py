"""Push: the writes of a followed key publish wake-ups (NOTIFY, at commit), each bundle
listens on a connection of its own and keeps a row in ``watches`` per key it follows, and
``wakeups.remote`` says whether it really listens."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Set

import asyncpg
import pytest

from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.protocol import LeaseConfig, follow, start_turn
from agentstores.protocol.follow import FollowEnd, FollowUpdate
from agentstores_postgres import listener as listener_module
from agentstores_postgres.listener import CHANNEL, digest
from agentstores_postgres.stores import PostgresStores

from .conftest import PgServer

P = "owner"
PUSH = "&push=true"
"""Push is on by default; the tests that need it say so anyway."""
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


async def _rows(admin_url: str, schema: str, key: ConversationKey) -> list[asyncpg.Record]:
    """The watch rows of ``key``: listener id and whether the row is live."""
    conn = await asyncpg.connect(admin_url)
    try:
        return await conn.fetch(
            f'SELECT listener, expires_at > now() AS live FROM "{schema}".watches '
            "WHERE tenant = $1 AND session_id = $2",
            key.tenant,
            key.session_id,
        )
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def _following(stores: PostgresStores, key: ConversationKey) -> AsyncIterator[None]:
    """A watcher of ``key`` on ``stores``, once its subscription is in place."""
    with stores.wakeups.watch(key):
        await _eventually(lambda: stores.wakeups.pushing(key))
        yield


async def test_each_write_a_follower_cares_about_publishes_the_keys_digest(pg: PgServer) -> None:
    followed, unfollowed = _key(), _key()
    async with PostgresStores(pg.url + PUSH) as stores, PostgresStores(pg.url) as follower:
        sup, rec, conv = stores.supervision, stores.recording, stores.conversations

        def writes(key: ConversationKey) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
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

            return run

        async with _following(follower, followed):
            mine = digest(stores.schema, followed)
            assert await _heard(pg.admin_url, writes(followed)) == [mine] * 8

            async def refused() -> None:  # nothing written: nothing published
                row = SupervisionRow("running", "m", 9)
                assert not await sup.compare_and_swap(followed, P, 7, row)
                assert not await sup.delete(followed, P, "m", 1)

            assert await _heard(pg.admin_url, refused) == []
            # the same writes of a key nobody follows publish nothing
            assert await _heard(pg.admin_url, writes(unfollowed)) == []


async def test_watch_rows_follow_what_is_watched(pg: PgServer) -> None:
    """A row per watched key under the bundle's listener id, gone once nobody watches the
    key; a write to an unwatched key publishes nothing."""
    followed, other = _key(), _key()
    async with PostgresStores(pg.url) as writer, PostgresStores(pg.url) as follower:
        listener = follower.listener
        assert listener is not None
        async with _following(follower, followed):
            rows = await _rows(pg.admin_url, follower.schema, followed)
            assert [(r["listener"], r["live"]) for r in rows] == [(listener.listener_id, True)]
            assert await _rows(pg.admin_url, follower.schema, other) == []

            def write(key: ConversationKey) -> Callable[[], Awaitable[object]]:
                row = SupervisionRow("running", "m", 1)
                return lambda: writer.supervision.compare_and_swap(key, P, None, row)

            assert await _heard(pg.admin_url, write(other)) == []
            assert await _heard(pg.admin_url, write(followed)) == [digest(writer.schema, followed)]
        schema = follower.schema

        async def gone() -> bool:
            return await _rows(pg.admin_url, schema, followed) == []

        await _eventually_async(gone)


async def _eventually_async(check: Callable[[], Awaitable[bool]], within: float = PATIENCE) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        assert loop.time() < deadline, "not within the patience"
        await asyncio.sleep(0.02)


async def test_a_dead_listeners_rows_wake_nobody_once_expired_and_are_swept(
    pg: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows a listener left behind (its process died): a live one still makes writes
    publish, an expired one does not, and a live listener's sweep deletes the expired."""
    monkeypatch.setattr(listener_module, "HEALTH_INTERVAL", 0.05)
    monkeypatch.setattr(listener_module, "SWEEP_EVERY", 1)
    live, expired = _key(), _key()
    async with PostgresStores(pg.url) as stores:
        schema = stores.schema
        admin = await asyncpg.connect(pg.admin_url)
        try:
            dead = uuid.uuid4()
            await admin.execute(
                f'INSERT INTO "{schema}".watches VALUES '
                "($1, $2, $5, now() + interval '1 hour'), ($3, $4, $5, now() - interval '1 s')",
                live.tenant,
                live.session_id,
                expired.tenant,
                expired.session_id,
                dead,
            )

            def write(key: ConversationKey) -> Callable[[], Awaitable[object]]:
                row = SupervisionRow("running", "m", 1)
                return lambda: stores.supervision.compare_and_swap(key, P, None, row)

            assert await _heard(pg.admin_url, write(expired)) == []
            assert await _heard(pg.admin_url, write(live)) == [digest(schema, live)]

            async def swept() -> bool:
                return await _rows(pg.admin_url, schema, expired) == []

            await _eventually_async(swept)
            assert [r["listener"] for r in await _rows(pg.admin_url, schema, live)] == [dead]
        finally:
            await admin.close()


async def test_a_listener_whose_rows_were_swept_subscribes_again(
    pg: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listener that stalled past the expiry finds its rows gone on its next beat and
    puts them back under a new listener id; push goes on."""
    monkeypatch.setattr(listener_module, "HEALTH_INTERVAL", 0.05)
    key = _key()
    async with PostgresStores(pg.url) as producer, PostgresStores(pg.url) as reader:
        listener = reader.listener
        assert listener is not None
        async with _following(reader, key):
            first = listener.listener_id
            admin = await asyncpg.connect(pg.admin_url)
            try:
                await admin.execute(
                    f'DELETE FROM "{reader.schema}".watches WHERE listener = $1', first
                )
            finally:
                await admin.close()

            async def back() -> bool:
                rows = await _rows(pg.admin_url, reader.schema, key)
                return [r["listener"] for r in rows] == [listener.listener_id] != [first]

            await _eventually_async(back)
            await _eventually(lambda: reader.wakeups.pushing(key))

            async def write() -> None:
                row = SupervisionRow("running", "m", 1)
                assert await producer.supervision.compare_and_swap(key, P, None, row)

            assert await _heard(pg.admin_url, write) == [digest(reader.schema, key)]


async def test_a_follower_subscribed_only_after_its_first_read_misses_nothing(
    pg: PgServer,
) -> None:
    """A write made between the follower's first read and its key's subscription
    publishes nothing; the subscription, once in place, wakes the follower to read it (its
    polls never come)."""
    key = _key()
    async with PostgresStores(pg.url) as producer, PostgresStores(pg.url) as reader:
        listener = reader.listener
        assert listener is not None
        gate = asyncio.Event()
        subscribe = listener.add_watches

        async def gated(keys: Set[ConversationKey]) -> None:
            await gate.wait()
            await subscribe(keys)

        listener.add_watches = gated  # type: ignore[method-assign]
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
        events = follow(reader, key, P, poll=FAR, safety_poll=FAR, dead_after=60)
        first = await asyncio.wait_for(anext(events), PATIENCE)
        assert isinstance(first, FollowUpdate) and first.text == "a"
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        assert not reader.wakeups.pushing(key)
        assert await _heard(pg.admin_url, lambda: lease.record(2, {"text": "ab"})) == []
        assert not waiting.done()
        gate.set()
        got = await waiting
        assert isinstance(got, FollowUpdate) and got.text == "ab"
        assert reader.wakeups.pushing(key)
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        await lease.record(3, {"text": "abc"})
        got = await waiting
        assert isinstance(got, FollowUpdate) and got.text == "abc"
        await events.aclose()


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
            gone = listener.listener_id
            gate.set()
            await _eventually(lambda: reader.wakeups.pushing(key))
            assert listener.connects > before and listener.server_pid not in (None, pid)
            # subscribed again under the new connection's id; the old id's row is gone
            rows = await _rows(pg.admin_url, reader.schema, key)
            assert [r["listener"] for r in rows] == [listener.listener_id] != [gone]
            # listening again: the far safety poll never comes, the push does
            waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
            await asyncio.sleep(0.3)
            await lease.record(3, {"text": "abc"})
            got = await waiting
            assert isinstance(got, FollowUpdate) and got.text == "abc"
        finally:
            await admin.close()
            await events.aclose()


async def test_push_is_on_by_default_and_false_neither_listens_nor_publishes(
    pg: PgServer,
) -> None:
    key = _key()
    async with PostgresStores(pg.url) as follower, PostgresStores(pg.url + "&push=false") as quiet:
        assert follower.listener is not None and follower.wakeups.remote
        assert quiet.listener is None and not quiet.wakeups.remote

        async def write() -> None:
            assert await quiet.supervision.compare_and_swap(
                key, P, None, SupervisionRow("running", "m", 1)
            )
            assert await quiet.supervision.compare_and_swap(
                key, P, 1, SupervisionRow("running", "m", 1)
            )
            await quiet.recording.put(key, P, RecordedEvent(0, {"text": "a"}, "m", 1))

        async with _following(follower, key):  # followed, yet the quiet writer publishes nothing
            assert await _heard(pg.admin_url, write) == []
    async with PostgresStores(pg.url + PUSH, pgbouncer=True) as pooled:
        assert pooled.listener is None and not pooled.wakeups.remote


async def test_closing_stops_listening(pg: PgServer) -> None:
    key = _key()
    stores = PostgresStores(pg.url + PUSH)
    async with stores:
        listener = stores.listener
        assert listener is not None and stores.wakeups.remote
        pid = listener.server_pid
        watch = stores.wakeups.watch(key)
        await _eventually(lambda: stores.wakeups.pushing(key))
    watch.close()
    assert stores.listener is None and not stores.wakeups.remote
    assert await _rows(pg.admin_url, stores.schema, key) == [], "closing deletes its rows"
    admin = await asyncpg.connect(pg.admin_url)
    try:
        assert not await admin.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid
        )
    finally:
        await admin.close()


async def test_after_closing_nothing_of_the_listener_runs(
    pg: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing stops the task that keeps the listening connection: none of the bundle's
    tasks is left. (A task left would beat, find no connection, and listen again on a
    connection nobody closes.) Beats come fast here, and after a few of them the server
    shows no listening connection of the role."""
    monkeypatch.setattr(listener_module, "HEALTH_INTERVAL", 0.05)
    key = _key()
    before = asyncio.all_tasks()
    async with PostgresStores(pg.url + PUSH) as stores:
        listener = stores.listener
        assert listener is not None
        async with _following(stores, key):  # a watch row, for close to delete
            pass
    left = asyncio.all_tasks() - before
    assert not left, f"tasks still running after close: {left}"
    await asyncio.sleep(0.3)  # several beats, had the listener's task been left running
    assert listener.server_pid is None and listener.connects == 1
    admin = await asyncpg.connect(pg.admin_url)
    try:
        listening = await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE usename = $1 AND application_name = 'agentstores-listener'",
            pg.installation.role,
        )
    finally:
        await admin.close()
    assert listening == 0
