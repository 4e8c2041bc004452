"""Sentinel: ``redis+sentinel://`` URLs checked at the edge, and a bundle that keeps working
when Sentinel moves the primary: ``SENTINEL FAILOVER`` (plain and coordinated) and SIGKILL.

Across a failover every call ends in a result or a typed error (the write in flight when
the primary died: :class:`UnknownOutcomeError`, or :class:`BackendUnavailableError` when
it was never sent), what was replicated before the failover is still there, writes
after it go to the new primary, and the push listener reconnects to the new primary.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from agentstores import (
    BackendUnavailableError,
    ConversationKey,
    Message,
    UnknownOutcomeError,
    UsageError,
)
from agentstores_redis.sentinel import parse_sentinel_url
from agentstores_redis.stores import RedisStores
from tests.servers.valkey import ValkeySentinelGroup, ValkeyServer, _info

from .conftest import with_prefix

PATIENCE = 30.0
"""Seconds a failover and the reconnects after it may take on a loaded machine."""


def key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


# --- the URL --------------------------------------------------------------------------


def test_a_sentinel_url_names_the_sentinels_the_service_and_the_database() -> None:
    target = parse_sentinel_url(
        "redis+sentinel://app:s%40cret@h1,h2:26380,[::1]:5000/orders/3"
        "?socket_keepalive=true&sentinel_password=sp"
    )
    assert target.sentinels == (("h1", 26379), ("h2", 26380), ("::1", 5000))
    assert target.service_name == "orders"
    assert target.sentinel_password == "sp" and target.sentinel_username is None
    # the data nodes' credentials, database and options; the Sentinels' own kept apart
    assert target.node_url == "redis://app:s%40cret@primary/3?socket_keepalive=true"
    assert parse_sentinel_url("valkey+sentinel://h/orders").node_url == "redis://primary/0"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://h1:26379", "names no service"),
        ("redis+sentinel://h1:26379/", "names no service"),
        ("redis+sentinel:///orders", "has no host"),
        ("redis+sentinel://h1,,h2/orders", "has no host"),
        ("redis+sentinel://h1:0/orders", "bad Sentinel port '0'"),
        ("redis+sentinel://h1:99999/orders", "bad Sentinel port '99999'"),
        ("redis+sentinel://h1:x/orders", "bad Sentinel port 'x'"),
        ("redis+sentinel://::1/orders", "needs brackets"),
        ("redis+sentinel://[::1/orders", "bad Sentinel address"),
        ("redis+sentinel://h1/orders/x", "must be a number"),
        ("redis+sentinel://h1/orders/0/1", "more than a service name"),
        ("redis+sentinel://h1/orders?db=1", "in its path"),
        ("redis+sentinel://h1/orders?pool_size=x", "bad redis option value"),
        ("redis+sentinel://h1/orders?sentinel_pasword=x", "unknown redis URL option"),
        ("redis+sentinel://h1/orders?ssl_ca_certs=x", "unknown redis URL option"),
        ("redis+sentinel://h1/orders?retry_on_timeout=1", "fixed by the adapter"),
        ("rediss+sentinel://h1/orders", "not supported yet"),
        ("valkeys+sentinel://h1/orders", "not supported yet"),
    ],
)
def test_a_bad_sentinel_url_is_refused_before_connecting(url: str, says: str) -> None:
    with pytest.raises(UsageError, match=says.replace("[", r"\[").replace("?", r"\?")):
        RedisStores(url)


def test_a_sentinel_url_keeps_the_sentinels_password_out_of_messages() -> None:
    with pytest.raises(UsageError) as caught:
        RedisStores("redis+sentinel://u:pw@h1/orders/x?sentinel_password=secret")
    assert "secret" not in str(caught.value) and "pw" not in str(caught.value)


# --- failover ---------------------------------------------------------------------------


@pytest.fixture(params=["failover", "coordinated-failover", "kill-primary"])
def how(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def group() -> Iterator[ValkeySentinelGroup]:
    """A group of its own: these tests move its primary."""
    with ValkeySentinelGroup() as started:
        yield started


def _replicated(group: ValkeySentinelGroup) -> bool:
    """Whether every replica has acknowledged everything the primary has written."""
    primary = group.primary
    assert primary is not None
    info = _info(primary, "replication")
    offset = int(info["master_repl_offset"])
    acks = [v for k, v in info.items() if k.startswith("slave") and k[5:].isdigit()]
    return len(acks) == len(group.replicas) and all(f"offset={offset}," in a for a in acks)


async def _until(check: object, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while True:
        done = await asyncio.to_thread(check) if callable(check) else check
        if done:
            return
        assert loop.time() < deadline, f"{what} not within {PATIENCE} s"
        await asyncio.sleep(0.05)


def test_a_bundle_follows_the_primary_across_a_failover(
    group: ValkeySentinelGroup, how: str
) -> None:
    asyncio.run(_across_a_failover(group, how))


async def _across_a_failover(group: ValkeySentinelGroup, how: str) -> None:
    url = with_prefix(group.url) + "&push=true&reconnect_window=30&socket_timeout=10"
    async with RedisStores(url) as s:
        k = key()
        before = [Message(f"b{i}", "user", i) for i in range(20)]
        await s.conversations.append_messages(k, "p", before)
        await _until(lambda: _replicated(group), "replication of the first writes")
        old = group.primary
        assert old is not None

        outcomes: Counter[str] = Counter()
        acked: list[str] = []
        stop = asyncio.Event()

        async def writer(w: int) -> None:
            i = 0
            while not stop.is_set():
                mid = f"w{w}-{i}"
                i += 1
                try:
                    await s.conversations.append_messages(k, "p", [Message(mid, "user", i)])
                except UnknownOutcomeError:
                    outcomes["unknown"] += 1
                except BackendUnavailableError:
                    outcomes["unavailable"] += 1
                else:
                    outcomes["ok"] += 1
                    acked.append(mid)
                await asyncio.sleep(0.005)

        writers = [asyncio.create_task(writer(w)) for w in range(4)]
        await asyncio.sleep(0.3)
        if how == "kill-primary":
            new: ValkeyServer = await asyncio.to_thread(group.kill_primary)
        else:
            coordinated = how == "coordinated-failover"
            new = await asyncio.to_thread(lambda: group.failover(coordinated=coordinated))
        assert new is not old
        await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*writers)  # any other exception fails the test here

        # the writes after the failover went to the new primary
        after = await s.conversations.append_messages(k, "p", [Message("after", "user", 0)])
        assert [m.id for m in after] == ["after"]
        assert await asyncio.to_thread(new.command, "EXISTS", s.keys.conv(k).header) == 1
        ids = {m.id for m in await s.conversations.read_messages(k, "p")}
        assert {m.id for m in before} <= ids, "writes replicated before the failover are kept"
        assert "after" in ids
        if how == "coordinated-failover":
            # the old primary's writes pause until the replica caught up: nothing acked is
            # lost (a plain failover or a crash may lose the last ones: asynchronous)
            assert set(acked) <= ids, sorted(set(acked) - ids)
        assert outcomes["ok"] > 0, outcomes

        # the push listener reconnected, to the new primary
        listener = s.listener
        assert listener is not None

        def on_new() -> bool:
            links = list(listener._links.values())
            return listener.connected and all(link.conn.port == new.port for link in links)

        await _until(on_new, "the push listener on the new primary")
        assert listener.connects >= 2
