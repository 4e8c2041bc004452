"""Push: the writes publish wake-ups on their conversation's shard channel, from inside
their script; each bundle's listener subscribes exactly the followed keys' channels, and
``wakeups.remote`` says whether it really listens."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow, Swap
from agentstores.protocol import LeaseConfig, follow, start_turn
from agentstores.protocol.follow import FollowEvent, FollowUpdate
from agentstores_redis import listener as listener_module
from agentstores_redis.stores import RedisStores
from tests.servers.valkey import ValkeyCluster, ValkeyServer

from .conftest import purge, with_prefix
from .helpers import PATIENCE, eventually

P = "owner"
FAR = 3600.0
"""Polls this far apart never come within a test: only a wake-up makes a follower read."""
LONG = LeaseConfig(heartbeat_interval=20, dead_after=60)


@pytest.fixture(params=("valkey", "valkey-cluster"))
def push_url(
    request: pytest.FixtureRequest, valkey_server: ValkeyServer, valkey_cluster: ValkeyCluster
) -> Iterator[str]:
    """A fresh-prefixed URL with push on, standalone and cluster (where routing differs)."""
    base = valkey_server.url if request.param == "valkey" else valkey_cluster.url
    url = with_prefix(base) + "&push=true"
    yield url
    purge(url)


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


async def _heard(
    stores: RedisStores, key: ConversationKey, write: Callable[[], Awaitable[object]]
) -> list[bytes]:
    """What a plain subscriber of ``key``'s wake channel hears while ``write`` runs: the
    payload of each message."""
    channel = stores.keys.conv(key).channel
    client = stores.client
    conn = client.new_connection(client.server_of(channel), "push-test")
    await conn.connect()  # type: ignore[no-untyped-call]
    try:
        await conn.send_command("SSUBSCRIBE", channel)
        assert (await conn.read_response())[0] == b"ssubscribe"
        await write()
        await conn.send_command("PING")  # answered after every message already sent
        got: list[bytes] = []
        while (reply := await conn.read_response())[0] != b"pong":
            assert reply[:2] == [b"smessage", channel.encode()], reply
            got.append(reply[2])
        return got
    finally:
        await conn.disconnect()


async def test_each_write_a_follower_cares_about_publishes_an_empty_message(url: str) -> None:
    """On every server: SPUBLISH from inside the scripts (Redis 7.0, Valkey, a cluster)."""
    key = _key()
    async with RedisStores(url + "&push=true") as stores:
        sup, rec, conv = stores.supervision, stores.recording, stores.conversations

        async def writes() -> None:
            assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "m", 1))
            assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "m", 1))
            await rec.put(key, P, RecordedEvent(0, {"text": "a"}, "m", 1))
            await conv.append_messages(key, P, [Message("u1", "user", "q")], epoch=1)
            await conv.append_messages(
                key, P, [Message("t1", "tool", "x")], expected_tail="u1", epoch=1
            )
            assert await conv.truncate(key, P, "t1", cut="before", epoch=1) == 1
            assert await rec.delete(key, P, "m", epoch=1)
            assert await sup.delete(key, P, "m", 1)
            assert await conv.delete(key, P)

        assert await _heard(stores, key, writes) == [b""] * 9

        other = _key()
        assert await sup.compare_and_swap(other, P, None, SupervisionRow("running", "m", 1))

        async def quiet() -> None:  # refused, changing nothing, or a heartbeat batch
            assert not await sup.compare_and_swap(other, P, 7, SupervisionRow("running", "m", 9))
            assert not await sup.delete(other, P, "m", 5)
            assert not await rec.delete(other, P, "m", epoch=1)
            await conv.append_messages(other, P, [Message("u1", "user", "q")])
            assert await conv.append_messages(other, P, [Message("u1", "user", "q")]) == []
            beats = [Swap(other, P, 1, SupervisionRow("running", "m", 1))]
            outcomes = await sup.compare_and_swap_many(beats)
            assert [o.swapped for o in outcomes] == [True]

        assert await _heard(stores, other, quiet) == [b""]  # the first append only


@pytest.fixture
def standalone_url(valkey_server: ValkeyServer) -> Iterator[str]:
    """A fresh-prefixed URL of the standalone server, without a push option."""
    url = with_prefix(valkey_server.url)
    yield url
    purge(url)


async def test_push_false_neither_listens_nor_publishes(standalone_url: str) -> None:
    url, key = standalone_url, _key()
    async with RedisStores(url + "&push=false") as quiet:
        assert quiet.listener is None and not quiet.wakeups.remote

        async def write() -> None:
            row = SupervisionRow("running", "m", 1)
            assert await quiet.supervision.compare_and_swap(key, P, None, row)
            await quiet.recording.put(key, P, RecordedEvent(0, {"text": "a"}, "m", 1))
            await quiet.conversations.append_messages(key, P, [Message("u1", "user", "q")])

        assert await _heard(quiet, key, write) == []
    async with RedisStores(url) as default, RedisStores(url, push=False) as keyword:
        assert default.listener is not None and default.wakeups.remote
        assert keyword.listener is None
    with pytest.raises(UsageError, match="push"):
        RedisStores(url + "&push=maybe")


def test_push_defaults_on_for_one_server_and_off_for_a_cluster() -> None:
    assert RedisStores("redis://127.0.0.1:1/0").push
    assert not RedisStores("redis+cluster://127.0.0.1:1").push
    assert RedisStores("redis+cluster://127.0.0.1:1?push=true").push
    assert RedisStores("valkey+cluster://127.0.0.1:1", push=True).push
    assert not RedisStores("redis://127.0.0.1:1/0?push=off").push


async def test_subscribes_exactly_the_followed_keys(push_url: str) -> None:
    async with RedisStores(push_url) as stores:
        listener = stores.listener
        assert listener is not None
        a, b = _key(), _key()

        async def subscribers(key: ConversationKey) -> int:
            channel = stores.keys.conv(key).channel
            reply = await stores.client.command(channel, "PUBSUB", "SHARDNUMSUB", channel)
            return int(reply[1])

        assert (await subscribers(a), await subscribers(b)) == (0, 0)
        with stores.wakeups.watch(a) as watch_a, stores.wakeups.watch(b) as watch_b:
            await eventually(lambda: watch_a.pushed and watch_b.pushed)
            assert (await subscribers(a), await subscribers(b)) == (1, 1)
            watch_a.close()
            await _until(lambda: subscribers(a), 0)
            assert await subscribers(b) == 1 and listener.active == {b}
        await _until(lambda: subscribers(b), 0)
        assert not listener.active


async def _until(count: Callable[[], Awaitable[int]], wanted: int) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while (got := await count()) != wanted:
        assert loop.time() < deadline, f"{got}, not {wanted}, within the patience"
        await asyncio.sleep(0.02)


async def _first(events: AsyncIterator[FollowEvent]) -> FollowEvent:
    return await asyncio.wait_for(anext(events), PATIENCE)


async def test_a_write_before_the_key_is_subscribed_is_read_once_it_is(push_url: str) -> None:
    """The follower's first read comes before its key's subscription is in place; a write
    made in between is read as soon as the subscription is confirmed, though no poll
    comes and the write published to nobody."""
    key = _key()
    async with RedisStores(push_url) as producer, RedisStores(push_url) as reader:
        listener = reader.listener
        assert listener is not None
        gate = asyncio.Event()
        subscribe = listener._subscribe

        async def gated(keys: frozenset[ConversationKey]) -> None:
            await gate.wait()
            await subscribe(keys)

        listener._subscribe = gated  # type: ignore[assignment,method-assign]
        lease = await start_turn(
            producer, key, P, "m", None, user_message=Message("u1", "user", "q"), lease_config=LONG
        )
        await lease.record(1, {"text": "a"})
        events = follow(reader, key, P, poll=FAR, safety_poll=FAR, dead_after=60)
        try:
            first = await _first(events)
            assert isinstance(first, FollowUpdate) and first.text == "a"
            waiting = asyncio.ensure_future(_first(events))
            await lease.record(2, {"text": "ab"})  # nobody subscribed: heard by no one
            await asyncio.sleep(0.2)
            assert not waiting.done() and not listener.active
            gate.set()
            got = await waiting
            assert isinstance(got, FollowUpdate) and got.text == "ab"
            assert listener.active == {key}
        finally:
            await events.aclose()


async def test_a_killed_listener_falls_back_to_polling_and_comes_back(push_url: str) -> None:
    key = _key()
    async with RedisStores(push_url) as producer, RedisStores(push_url) as reader:
        listener = reader.listener
        assert listener is not None and reader.wakeups.remote
        before = listener.connects
        lease = await start_turn(
            producer, key, P, "m", None, user_message=Message("u1", "user", "q"), lease_config=LONG
        )
        await lease.record(1, {"text": "a"})
        # polls 0.2 s apart without push, never with it
        events = follow(reader, key, P, poll=0.2, safety_poll=FAR, dead_after=60)
        try:
            assert (await _first(events)).index == 1  # type: ignore[union-attr]
            await eventually(lambda: listener.pushing(key))
            # the reconnect waits for the test's word, so the time without push is seen
            gate = asyncio.Event()
            reconnect = listener._connect

            async def gated() -> None:
                await gate.wait()
                await reconnect()

            listener._connect = gated  # type: ignore[method-assign]
            killed = await producer.client.on_primaries("CLIENT", "KILL", "TYPE", "pubsub")
            assert sum(int(n) for n in killed) >= 1, killed
            await eventually(lambda: not reader.wakeups.remote)
            assert not listener.active
            # a write while nobody listens reaches the follower by polling
            waiting = asyncio.ensure_future(_first(events))
            await lease.record(2, {"text": "ab"})
            got = await waiting
            assert isinstance(got, FollowUpdate) and got.text == "ab"
            assert not reader.wakeups.remote
            gate.set()
            await eventually(lambda: reader.wakeups.remote and listener.pushing(key))
            assert listener.connects == before + 1
            # listening again: the far safety poll never comes, the push does
            waiting = asyncio.ensure_future(_first(events))
            await asyncio.sleep(0.3)
            await lease.record(3, {"text": "abc"})
            got = await waiting
            assert isinstance(got, FollowUpdate) and got.text == "abc"
        finally:
            await events.aclose()


async def test_closing_stops_listening(valkey_server: ValkeyServer, standalone_url: str) -> None:
    name = f"t-{uuid.uuid4().hex[:8]}"

    def listening() -> int:
        clients = valkey_server.command("CLIENT", "LIST")
        text = clients.decode() if isinstance(clients, bytes) else str(clients)
        return text.count(f"name={name}-push ")

    stores = RedisStores(standalone_url + f"&client_name={name}")
    async with stores:
        assert stores.listener is not None and stores.wakeups.remote
        assert listening() == 1
    assert stores.listener is None and not stores.wakeups.remote
    await eventually(lambda: listening() == 0)


def _move_slot(cluster: ValkeyCluster, slot: int, to: ValkeyServer) -> None:
    """Give ``slot`` (holding no key) to ``to``, telling every node."""
    target = to.command("CLUSTER", "MYID")
    target = target.decode() if isinstance(target, bytes) else str(target)
    for node in sorted(cluster.nodes, key=lambda n: n is not to):  # the new owner first
        node.command("CLUSTER", "SETSLOT", str(slot), "NODE", target)


async def test_a_moved_slot_moves_the_subscription(valkey_cluster: ValkeyCluster) -> None:
    """The server drops the subscriptions of a slot it gives away; the listener
    reconnects on the new slot map and subscribes on the slot's new primary."""
    url = with_prefix(valkey_cluster.url) + "&push=true"
    source = target = None
    try:
        async with RedisStores(url) as producer, RedisStores(url) as reader:
            listener = reader.listener
            assert listener is not None
            while True:  # a key whose slot holds no key yet, so it can move at once
                key = _key()
                channel = reader.keys.conv(key).channel
                slot = int(valkey_cluster.nodes[0].command("CLUSTER", "KEYSLOT", channel))
                source = valkey_cluster.node_for_slot(slot)
                if int(source.command("CLUSTER", "COUNTKEYSINSLOT", str(slot))) == 0:
                    break
            target = next(n for n in valkey_cluster.nodes if n is not source)
            with reader.wakeups.watch(key) as watch:
                await eventually(lambda: watch.pushed)
                before = listener.connects
                _move_slot(valkey_cluster, slot, target)
                await eventually(lambda: listener.connects > before and watch.pushed)
                reply = await reader.client.command(channel, "PUBSUB", "SHARDNUMSUB", channel)
                assert int(reply[1]) == 1  # routed by the new map: asked of the new primary
                await watch.wait(0)  # the wake-ups of the move itself
                row = SupervisionRow("running", "m", 1)
                assert await producer.supervision.compare_and_swap(key, P, None, row)
                assert await watch.wait(PATIENCE)
    finally:
        if source is not None and target is not None:  # the slot as it was, keys and all
            for name in reader.keys.conv(key).all:
                target.command("DEL", name)
            _move_slot(valkey_cluster, slot, source)
            valkey_cluster.wait_ready()


async def test_an_unanswered_health_check_counts_as_lost(
    standalone_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that stops answering (``CLIENT PAUSE``) without closing the connection:
    the ``PING`` goes unanswered, followers poll, and once it answers push comes back."""
    monkeypatch.setattr(listener_module, "HEALTH_INTERVAL", 0.1)
    monkeypatch.setattr(listener_module, "HEALTH_TIMEOUT", 0.3)
    async with RedisStores(standalone_url + "&push=true") as stores:
        listener = stores.listener
        assert listener is not None and stores.wakeups.remote
        before = listener.connects
        with stores.wakeups.watch(_key()) as watch:
            await eventually(lambda: watch.pushed)
            await stores.client.command("any", "CLIENT", "PAUSE", "1500", "ALL")
            await eventually(lambda: not stores.wakeups.remote and not watch.pushed)
            await eventually(lambda: listener.connects > before and watch.pushed)


async def test_push_without_the_right_to_publish_is_refused_at_open(
    valkey_server: ValkeyServer, standalone_url: str
) -> None:
    """A user whose ACL grants no channel: a refused publish must not fail writes that
    already ran, so opening with push on says so, and push=false opens."""
    user = f"u{uuid.uuid4().hex[:8]}"
    valkey_server.command("ACL", "SETUSER", user, "on", ">secret-pw", "~*", "+@all")
    url = standalone_url.replace("redis://", f"redis://{user}:secret-pw@")
    try:
        with pytest.raises(UsageError, match="push=false") as refused:
            async with RedisStores(url + "&push=true"):
                pass
        assert "secret-pw" not in str(refused.value)
        async with RedisStores(url + "&push=false") as quiet:
            row = SupervisionRow("running", "m", 1)
            assert await quiet.supervision.compare_and_swap(_key(), P, None, row)
    finally:
        valkey_server.command("ACL", "DELUSER", user)
