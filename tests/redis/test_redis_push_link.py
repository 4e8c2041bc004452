"""Push, end to end and on one pub/sub link: what must hold.

- A bundle with push on listens: ``wakeups.remote`` is True and a follower of a key wakes
  when another bundle writes it, without any poll.
- Once the link is lost ``wakeups.remote`` (and each watch's ``pushed``) reads False, a
  bool as on every backend, so followers poll again.
- The listener's task carries the backend's name (told apart in a task dump).
- An idle listener (nothing subscribed: the server answers ``PING`` with ``+PONG``) passes
  its health checks and is not reconnected.
- A link: ``SSUBSCRIBE``, ``SUNSUBSCRIBE`` and ``PING`` each return once the server
  confirmed them; a message on a subscribed channel reaches ``on_message`` and none does
  once unsubscribed; a call waiting when the connection drops fails with ``LinkLost``;
  opening against a server that accepts and never answers fails within the given bound.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow
from agentstores_redis import listener as listener_module
from agentstores_redis.pubsub_link import Link, LinkLost
from agentstores_redis.stores import RedisStores
from tests.servers.netfault import NetFaultProxy
from tests.servers.valkey import ValkeyServer

from .conftest import purge, with_prefix
from .helpers import PATIENCE, Admin, eventually

P = "owner"
LISTENER_TASK = "agentstores-redis-listener"


@pytest.fixture
def push_url(valkey_server: ValkeyServer) -> Iterator[str]:
    """A fresh-prefixed URL of the standalone server with push on."""
    url = with_prefix(valkey_server.url) + "&push=true"
    yield url
    purge(url)


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


def _link(stores: RedisStores, heard: list[bytes], lost: list[Link]) -> Link:
    """A link on a new connection to the bundle's one server, recording what it hears."""
    client = stores.client
    conn = client.new_connection(client.servers()[0], f"link-test-{uuid.uuid4().hex[:6]}")
    return Link(conn, heard.append, lost.append)


# --- the listener ------------------------------------------------------------------


async def test_a_write_by_another_bundle_wakes_a_follower_by_push(push_url: str) -> None:
    """Push on: the bundle listens (``remote`` is True) and another bundle's write wakes
    the follower of its key (no poll: a watch only wakes when notified)."""
    key = _key()
    async with RedisStores(push_url) as producer, RedisStores(push_url) as reader:
        assert reader.listener is not None and reader.listener.connected
        assert reader.wakeups.remote is True
        with reader.wakeups.watch(key) as watch:
            await eventually(lambda: watch.pushed)
            await watch.wait(0)  # the wake-up of the subscription itself
            row = SupervisionRow("running", "m", 1)
            assert await producer.supervision.compare_and_swap(key, P, None, row)
            assert await watch.wait(PATIENCE)


async def test_a_lost_link_reads_remote_exactly_false(push_url: str) -> None:
    """``wakeups.remote`` is a bool: False (not merely falsy) once the link is lost, and
    so is each watch's ``pushed``, until the listener is back."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    async with RedisStores(push_url + f"&client_name={name}") as stores:
        listener = stores.listener
        assert listener is not None and stores.wakeups.remote is True
        gate = asyncio.Event()  # the reconnect waits for the test's word
        reconnect = listener._connect

        async def gated() -> None:
            await gate.wait()
            await reconnect()

        listener._connect = gated  # type: ignore[method-assign]
        with stores.wakeups.watch(_key()) as watch:
            await eventually(lambda: watch.pushed)
            admin = Admin([_port(push_url)])
            try:
                assert await admin.kill(f"{name}-push") == 1
            finally:
                await admin.close()
            await eventually(lambda: not listener.connected)
            assert stores.wakeups.remote is False
            assert watch.pushed is False
            gate.set()
            await eventually(lambda: stores.wakeups.remote is True and watch.pushed is True)


def _port(url: str) -> int:
    return int(url.split("://", 1)[1].split("/", 1)[0].rpartition(":")[2])


async def test_the_listener_task_is_named_for_the_backend(push_url: str) -> None:
    """A task dump tells the Redis listener's task apart by its name; closing ends it."""

    def named() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t.get_name() == LISTENER_TASK]

    async with RedisStores(push_url) as stores:
        assert stores.listener is not None
        assert len(named()) == 1
    assert named() == []


async def test_an_idle_listener_passes_its_health_checks(
    push_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing subscribed, the server answers ``PING`` with ``+PONG``: that is an answer,
    so the link stays up through many health checks and is never reopened."""
    monkeypatch.setattr(listener_module, "HEALTH_INTERVAL", 0.02)
    async with RedisStores(push_url) as stores:
        listener = stores.listener
        assert listener is not None and listener.connects == 1
        checks: list[bool] = []
        healthy = listener._healthy

        async def counted() -> bool:
            checks.append(await healthy())
            return checks[-1]

        listener._healthy = counted  # type: ignore[method-assign]
        await eventually(lambda: len(checks) >= 5)
        assert all(checks)
        assert listener.connects == 1 and stores.wakeups.remote is True


# --- one link ----------------------------------------------------------------------


async def test_a_link_confirms_subscribing_pings_and_unsubscribing(push_url: str) -> None:
    """Each call returns once confirmed; a subscribed channel's message is heard, and an
    unsubscribed one's no more (a ``PING`` is answered after every message sent before)."""
    async with RedisStores(push_url) as stores:
        heard: list[bytes] = []
        lost: list[Link] = []
        link = _link(stores, heard, lost)
        channel = stores.keys.conv(_key()).channel
        raw = channel.encode()
        await link.open(PATIENCE)
        try:
            assert await link.ping(PATIENCE)  # not subscribed: +PONG
            await link.call([(b"SSUBSCRIBE", raw)], PATIENCE)
            assert await link.ping(PATIENCE)  # subscribed: ["pong", ""]
            await stores.client.command(channel, "SPUBLISH", channel, "")
            assert await link.ping(PATIENCE)
            assert heard == [raw]
            await link.call([(b"SUNSUBSCRIBE", raw)], PATIENCE)
            await stores.client.command(channel, "SPUBLISH", channel, "")
            assert await link.ping(PATIENCE)
            assert heard == [raw] and link.failed is None and lost == []
        finally:
            await link.close()
        with pytest.raises(LinkLost):
            await link.call([(b"PING", None)], PATIENCE)
        assert lost == []  # closing is not a loss


async def test_a_call_waiting_when_the_link_drops_fails_with_linklost(
    valkey_server: ValkeyServer,
) -> None:
    """The server swallows the ``SSUBSCRIBE`` and then the connection is reset: the
    waiting call fails with LinkLost and the owner is told once."""
    proxy = await NetFaultProxy("127.0.0.1", valkey_server.port).start()
    url = with_prefix(f"redis://127.0.0.1:{proxy.port}/0") + "&push=false"
    try:
        async with RedisStores(url) as stores:
            heard: list[bytes] = []
            lost: list[Link] = []
            link = _link(stores, heard, lost)
            await link.open(PATIENCE)
            try:
                proxy.blackhole()
                call = asyncio.ensure_future(link.call([(b"SSUBSCRIBE", b"c")], PATIENCE))
                await asyncio.sleep(0.1)
                assert not call.done()
                proxy.partition()
                with pytest.raises(LinkLost):
                    await call
                assert lost == [link] and link.failed is not None
                assert not await link.ping(PATIENCE)
            finally:
                proxy.pass_through()
                await link.close()
            await stores.purge()
    finally:
        await proxy.close()


async def test_opening_against_a_silent_server_fails_within_the_bound(
    valkey_server: ValkeyServer,
) -> None:
    """A server that accepts and never answers the handshake: ``open(within)`` gives up
    with TimeoutError (checked as a hang detector: done well inside the patience)."""
    proxy = await NetFaultProxy("127.0.0.1", valkey_server.port).start()
    url = with_prefix(f"redis://127.0.0.1:{proxy.port}/0") + "&push=false"
    try:
        async with RedisStores(url) as stores:
            link = _link(stores, [], [])
            proxy.blackhole()
            opening = asyncio.ensure_future(link.open(0.2))
            done, _ = await asyncio.wait({opening}, timeout=PATIENCE)
            if not done:
                opening.cancel()
            assert done, "open did not give up within its bound"
            assert isinstance(opening.exception(), TimeoutError)
            await link.close()
            proxy.pass_through()
            await stores.purge()
    finally:
        await proxy.close()
