"""Edges of the Redis stores: replies lost after a write landed, refusals that name what
they refused, the store clock with the server gone, and Sentinel URLs.

What must hold:

- ``set_metadata``, ``share`` and ``recording.delete`` whose reply was lost after the
  server ran them return what an answered call returns (reconciled from the stored
  result), never an error;
- truncating at a message the conversation does not hold raises NotFoundError naming
  that message;
- ``now()`` with the server unreachable raises BackendUnavailableError, not the
  driver's own exception;
- a Sentinel URL's hosts (several, comma-separated), service name and database are
  read from it, and a bad host is refused naming the URL without its password;
- a bundle opened through a Sentinel reaches the primary the Sentinel names for the
  service, and its connections to the Sentinel carry the bundle's name.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from agentstores import (
    BackendUnavailableError,
    ConversationKey,
    Message,
    NotFoundError,
    RecordedEvent,
    UsageError,
)
from agentstores_redis.sentinel import parse_sentinel_url
from agentstores_redis.stores import RedisStores
from tests.servers.valkey import ValkeySentinel, ValkeyServer

from .conftest import with_prefix
from .helpers import Relay


def key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


def prefix() -> str:
    return f"astest-{uuid.uuid4().hex[:8]}"


async def _conv(s: RedisStores, k: ConversationKey) -> None:
    await s.conversations.append_messages(
        k, "p", [Message("u1", "user", "q"), Message("a1", "assistant", "r")]
    )


@pytest.fixture
async def relay(valkey_server: ValkeyServer) -> Any:
    r = await Relay(valkey_server.port).start()
    yield r
    await r.close()


# --- a reply lost after the write landed: the answered call's result ----------------


async def test_set_metadata_whose_reply_was_lost_returns_as_answered(relay: Relay) -> None:
    """The metadata write ran, its reply was lost: the call returns None as an answered
    one does (reconciled), and the metadata is stored."""
    k = key()
    async with RedisStores(relay.url(prefix()), pool_size=4) as s:
        await _conv(s, k)
        relay.lose_next_reply()
        before = s.ctx.reconciled
        assert await s.conversations.set_metadata(k, "p", {"topic": "x"}) is None
        assert relay.cut == 1, "the relay did not cut the connection"
        assert s.ctx.reconciled == before + 1
        info = await s.conversations.get_conversation(k, "p")
        assert info is not None and info.metadata == {"topic": "x"}
        await s.purge()


async def test_share_whose_reply_was_lost_returns_as_answered(relay: Relay) -> None:
    """The share ran, its reply was lost: the call returns None, and the reader it was
    shared with can read the conversation."""
    k = key()
    async with RedisStores(relay.url(prefix()), pool_size=4) as s:
        await _conv(s, k)
        relay.lose_next_reply()
        before = s.ctx.reconciled
        assert await s.conversations.share(k, "p", "reader") is None
        assert relay.cut == 1, "the relay did not cut the connection"
        assert s.ctx.reconciled == before + 1
        assert await s.conversations.get_conversation(k, "reader") is not None
        await s.purge()


async def test_recording_delete_whose_reply_was_lost_returns_true(relay: Relay) -> None:
    """The snapshot's delete ran, its reply was lost: the call returns True (this call
    removed it), as an answered one does, and the snapshot is gone."""
    k = key()
    async with RedisStores(relay.url(prefix()), pool_size=4) as s:
        assert await s.recording.put(k, "p", RecordedEvent(2, {"x": 1}, "m", 1))
        relay.lose_next_reply()
        before = s.ctx.reconciled
        assert await s.recording.delete(k, "p", "m") is True
        assert relay.cut == 1, "the relay did not cut the connection"
        assert s.ctx.reconciled == before + 1
        assert await s.recording.read(k, "p") is None
        await s.purge()


# --- refusals ---------------------------------------------------------------------


async def test_truncate_at_an_unknown_message_names_it(valkey_server: ValkeyServer) -> None:
    """Truncating at an id the conversation does not hold is NotFoundError, and the
    error names the id asked for (the caller learns which message was missing)."""
    k = key()
    async with RedisStores(with_prefix(valkey_server.url)) as s:
        await _conv(s, k)
        with pytest.raises(NotFoundError, match="no message 'nope-42'"):
            await s.conversations.truncate(k, "p", "nope-42")
        assert [m.id for m in await s.conversations.read_messages(k, "p")] == ["u1", "a1"]
        await s.purge()


# --- the store clock with the server gone ---------------------------------------------


async def test_now_with_the_server_unreachable_is_backend_unavailable(
    valkey_server: ValkeyServer,
) -> None:
    """The bundle's server goes away (the relay in front of it closes: every connection
    cut, new ones refused): ``now()`` raises BackendUnavailableError, never redis-py's
    or the client's own exception."""
    relay = await Relay(valkey_server.port).start()
    closed = False
    try:
        url = relay.url(prefix()) + "&connect_timeout=1"
        async with RedisStores(url, pool_size=2, reconnect_window=0.2, push=False) as s:
            await s.now()
            await relay.close()
            closed = True
            with pytest.raises(BackendUnavailableError):
                await s.now()
    finally:
        if not closed:
            await relay.close()


# --- Sentinel URLs -----------------------------------------------------------------


def test_a_sentinel_url_lists_every_sentinel_host() -> None:
    """Every comma-separated host is a Sentinel, in the URL's order, each with its own
    port (26379 when left out); the service and database come from the path."""
    target = parse_sentinel_url("redis+sentinel://s1:26380,s2,s3:1234/billing/7")
    assert target.sentinels == (("s1", 26380), ("s2", 26379), ("s3", 1234))
    assert target.service_name == "billing"
    assert target.node_url == "redis://primary/7"


def test_a_sentinel_url_without_a_database_uses_db_0() -> None:
    target = parse_sentinel_url("redis+sentinel://s1/orders")
    assert target.sentinels == (("s1", 26379),)
    assert target.service_name == "orders"
    assert target.node_url == "redis://primary/0"


def test_a_bad_sentinel_host_is_refused_naming_the_url_without_its_password() -> None:
    """A bad Sentinel port is a UsageError that shows the URL (so the caller sees which
    one), with the data nodes' password redacted."""
    url = "redis+sentinel://app:hunter2@s1:26379,s2:badport/orders"
    with pytest.raises(UsageError) as caught:
        parse_sentinel_url(url)
    message = str(caught.value)
    assert "hunter2" not in message
    assert "s2:badport/orders" in message, "the message names the URL"


@pytest.fixture
def sentinel(valkey_server: ValkeyServer, tmp_path: Path) -> Any:
    """One Sentinel watching the session's server as ``edges`` (never failing it over)."""
    with ValkeySentinel(
        service="edges",
        primary_port=valkey_server.port,
        quorum=1,
        down_after_ms=60_000,
        failover_timeout_ms=60_000,
        directory=tmp_path,
    ) as started:
        yield started


async def test_a_bundle_opened_through_a_sentinel_reaches_the_named_primary(
    sentinel: ValkeySentinel, valkey_server: ValkeyServer
) -> None:
    """Opened by a Sentinel URL, the bundle writes to the primary the Sentinel names for
    the service (the data is there for a bundle opened directly), and its connections
    to the Sentinel carry the bundle's client name (``<name>-sentinel``), so an operator
    can tell them apart."""
    name = f"edges-{uuid.uuid4().hex[:8]}"
    shared = prefix()
    url = f"redis+sentinel://127.0.0.1:{sentinel.port}/edges/0?key_prefix={shared}"
    k = key()
    async with RedisStores(url, client_name=name, push=False) as s:
        await _conv(s, k)
        clients = sentinel.command("CLIENT", "LIST")
        listing = clients.decode() if isinstance(clients, bytes) else str(clients)
        assert f"name={name}-sentinel " in listing
        async with RedisStores(with_prefix(valkey_server.url, shared), push=False) as direct:
            ids = [m.id for m in await direct.conversations.read_messages(k, "p")]
            assert ids == ["u1", "a1"]
        await s.purge()
