"""Push on MongoDB: a change stream on the header collection per bundle, matching the
followed keys on the server, carrying nothing but the key, resumed after a loss."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterator

import pytest
from pymongo import AsyncMongoClient

from agentstores.errors import BackendUnavailableError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow
from agentstores.protocol import LeaseConfig, follow, start_turn
from agentstores.protocol.follow import FollowEnd, FollowUpdate
from agentstores_mongo.changes import ChangeListener
from agentstores_mongo.stores import MongoStores
from tests.servers.mongo import Installation, NxServer, with_option

P = "owner"
FAR = 3600.0
"""Polls this far apart never come within a test: only a wake-up makes a follower read."""
PATIENCE = 10.0
LONG = LeaseConfig(heartbeat_interval=20, dead_after=60)
SECRET = "the-answer-text-42"


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


async def _eventually(check: Callable[[], bool], within: float = PATIENCE) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "not within the patience"
        await asyncio.sleep(0.01)


def _listener(stores: MongoStores) -> ChangeListener:
    assert stores.listener is not None and stores.wakeups.remote
    return stores.listener


@pytest.fixture
def nx_installed(nx_server: NxServer) -> Iterator[Installation]:
    with Installation(nx_server.url) as inst:
        yield inst


async def _serves_change_streams(url: str) -> bool:
    """What the server says of itself: nx-27017, a replica set member or a mongos."""
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(url)
    try:
        hello = await client.admin.command("hello")
        info = await client.admin.command("buildInfo")
    finally:
        await client.close()
    return info.get("process") == "nx_27017" or "setName" in hello or hello.get("msg") == "isdbgrid"


async def test_push_is_on_exactly_where_the_server_serves_change_streams(
    installed: Installation, caplog: pytest.LogCaptureFixture
) -> None:
    serves = await _serves_change_streams(installed.base_url)
    with caplog.at_level(logging.WARNING, logger="agentstores_mongo.stores"):
        async with MongoStores(installed.url, push="auto") as stores:
            assert (stores.listener is not None) == serves == stores.wakeups.remote
    assert serves or "refuses change streams" in caplog.text
    if not serves:
        with pytest.raises(BackendUnavailableError, match="change streams"):
            async with MongoStores(installed.url, push="true"):
                pass
    for off in ({}, {"push": "false"}, {"push": "off"}, {"push": False}):
        async with MongoStores(installed.url, **off) as quiet:  # off by default
            assert quiet.listener is None and not quiet.wakeups.remote
    with pytest.raises(UsageError, match="push"):
        MongoStores(with_option(installed.url, "push", "maybe"))


async def test_two_bundles_wake_each_others_followers(nx_installed: Installation) -> None:
    key = _key()
    async with (
        MongoStores(nx_installed.url, push=True) as producer,
        MongoStores(nx_installed.url, push=True) as reader,
    ):
        listener = _listener(reader)
        assert listener.opens == 0  # nothing followed: no stream
        lease = await start_turn(
            producer, key, P, "m", None, user_message=Message("u1", "user", "q"), lease_config=LONG
        )
        await lease.record(3, {"text": "abc"})
        events = follow(reader, key, P, poll=FAR, safety_poll=FAR, dead_after=60)
        first = await asyncio.wait_for(anext(events), PATIENCE)
        assert isinstance(first, FollowUpdate) and first.text == "abc"
        await _eventually(lambda: reader.wakeups.pushing(key))
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        await asyncio.sleep(0.1)
        await lease.record(6, {"text": "abcdef"})
        second = await waiting
        assert isinstance(second, FollowUpdate) and second.text == "abcdef"
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        heard = listener.heard
        await lease.append(
            [Message("m", "assistant", "abcdef")], expected_tail="u1", last_turn_status="complete"
        )
        await _eventually(lambda: listener.heard > heard)
        await asyncio.sleep(0.1)  # the follower has read the append (no update in it)
        assert not waiting.done()
        await lease.seal("done")
        end = await waiting
        assert isinstance(end, FollowEnd) and end.verdict == "done"
        await events.aclose()
        await _eventually(lambda: listener.cursor_id is None)  # nobody follows: closed


async def test_an_unfollowed_key_is_filtered_on_the_server(nx_installed: Installation) -> None:
    followed, other = _key(), _key()
    async with (
        MongoStores(nx_installed.url, push=True) as producer,
        MongoStores(nx_installed.url, push=True) as reader,
    ):
        listener = _listener(reader)
        with reader.wakeups.watch(followed):
            await _eventually(lambda: reader.wakeups.pushing(followed))
            row = SupervisionRow("running", "m", 1)
            for _ in range(5):
                assert await producer.supervision.compare_and_swap(other, P, None, row)
                assert await producer.supervision.delete(other, P, "m", 1)
            assert await producer.supervision.compare_and_swap(followed, P, None, row)
            await _eventually(lambda: listener.heard >= 1)
            await asyncio.sleep(0.2)
            assert listener.strays == 0  # the ten writes of the other key never arrived


async def test_change_events_carry_the_key_and_nothing_of_the_content(
    nx_installed: Installation,
) -> None:
    key = _key()
    async with MongoStores(nx_installed.url, push=True) as stores:
        listener = _listener(stores)
        stream = await listener._watch([key.storage_name])
        try:
            lease = await start_turn(
                stores, key, P, "m", None, user_message=Message("u1", "user", SECRET)
            )
            await lease.record(len(SECRET), {"text": SECRET})
            await lease.append(
                [Message("m", "assistant", SECRET)], expected_tail="u1", last_turn_status="complete"
            )
            changes: list[dict[str, object]] = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + PATIENCE
            while len(changes) < 3:
                assert loop.time() < deadline
                change = await stream.try_next()
                if change is not None:
                    changes.append(change)
            for change in changes:
                assert change["documentKey"] == {"_id": key.storage_name}
                assert change.get("fullDocument") is None and not change.get("updateDescription")
                assert SECRET not in repr(change)
            await lease.release()
        finally:
            await stream.close()


async def test_a_killed_stream_falls_back_to_polling_and_resumes_without_a_gap(
    nx_installed: Installation,
) -> None:
    key = _key()
    async with (
        MongoStores(nx_installed.url, push=True) as producer,
        MongoStores(nx_installed.url, push=True) as reader,
    ):
        listener = _listener(reader)
        lease = await start_turn(
            producer, key, P, "m", None, user_message=Message("u1", "user", "q"), lease_config=LONG
        )
        await lease.record(1, {"text": "a"})
        # polls 0.2 s apart without push, never with it
        events = follow(reader, key, P, poll=0.2, safety_poll=FAR, dead_after=60)
        assert (await asyncio.wait_for(anext(events), PATIENCE)).index == 1  # type: ignore[union-attr]
        await _eventually(lambda: reader.wakeups.pushing(key))
        cursor, opens = listener.cursor_id, listener.opens
        assert cursor is not None
        # the reopen waits for the test's word, so the time without push is seen
        gate = asyncio.Event()
        reopen = listener._reopen

        async def gated() -> None:
            await gate.wait()
            await reopen()

        listener._reopen = gated  # type: ignore[method-assign]
        admin: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(nx_installed.base_url)
        try:
            db = admin.get_database(reader.ctx.db.name)
            await db.command("killCursors", f"{nx_installed.prefix}keys", cursors=[cursor])
            await _eventually(lambda: not reader.wakeups.remote)
            # a write while nobody listens reaches the follower by polling
            waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
            await lease.record(2, {"text": "ab"})
            got = await waiting
            assert isinstance(got, FollowUpdate) and got.text == "ab"
            assert not reader.wakeups.remote and not reader.wakeups.pushing(key)
            heard = listener.heard
            gate.set()
            await _eventually(lambda: reader.wakeups.pushing(key))
            assert listener.opens > opens and listener.cursor_id not in (None, cursor)
            # resumed after the last event seen: the write made while away is heard
            await _eventually(lambda: listener.heard > heard)
            # listening again: the far safety poll never comes, the push does
            waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
            await asyncio.sleep(0.3)
            await lease.record(3, {"text": "abc"})
            got = await waiting
            assert isinstance(got, FollowUpdate) and got.text == "abc"
        finally:
            await admin.close()
            await events.aclose()


async def test_a_write_before_the_stream_opens_is_read_once_it_is_open(
    nx_installed: Installation,
) -> None:
    """The key is watched after the follower's first read; a write before its stream is
    open wakes nothing by itself, and the subscription's wake-up reads it."""
    key = _key()
    async with (
        MongoStores(nx_installed.url, push=True) as producer,
        MongoStores(nx_installed.url, push=True) as reader,
    ):
        listener = _listener(reader)
        gate = asyncio.Event()
        subscribe = listener._subscribe

        async def gated(keys: object) -> None:
            await gate.wait()
            await subscribe(keys)  # type: ignore[arg-type]

        listener._subscribe = gated  # type: ignore[method-assign]
        lease = await start_turn(
            producer, key, P, "m", None, user_message=Message("u1", "user", "q"), lease_config=LONG
        )
        await lease.record(3, {"text": "abc"})
        events = follow(reader, key, P, poll=FAR, safety_poll=FAR, dead_after=60)
        first = await asyncio.wait_for(anext(events), PATIENCE)
        assert isinstance(first, FollowUpdate) and first.text == "abc"
        assert not reader.wakeups.pushing(key)
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        await lease.record(6, {"text": "abcdef"})
        await asyncio.sleep(0.2)
        assert not waiting.done()  # unpushed, with a far poll: nothing reads it yet
        gate.set()
        second = await waiting
        assert isinstance(second, FollowUpdate) and second.text == "abcdef"
        assert reader.wakeups.pushing(key)
        await events.aclose()


async def test_closing_stops_the_stream(nx_installed: Installation) -> None:
    stores = MongoStores(nx_installed.url, push=True)
    async with stores:
        listener = _listener(stores)
        with stores.wakeups.watch(_key()) as watch:
            await _eventually(lambda: watch.pushed)
            assert listener.cursor_id is not None
    assert stores.listener is None and not stores.wakeups.remote
    assert listener.cursor_id is None and listener._reader is None
