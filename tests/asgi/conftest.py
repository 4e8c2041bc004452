"""Fixtures for the web-surface tests: two replicas over one store, and callers."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator

import pytest

from agentstores import EphemeralStoreWarning
from tests.servers.backends import Servers, servers

from .harness import PACE, Caller, Replica, make_app

REPLICATED = ("memory", "file", "postgres", "redis")
"""The backends the cross-replica scenarios run on (each wakes followers its own way)."""

warnings.filterwarnings("ignore", category=EphemeralStoreWarning)


@pytest.fixture(scope="session")
def asgi_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with servers(tmp_path_factory.mktemp("asgi")) as s:
        yield s


@pytest.fixture(params=REPLICATED)
def store_url(request: pytest.FixtureRequest, asgi_servers: Servers) -> str:
    """A store URL on each backend (its server made ready here, outside the loop)."""
    return asgi_servers.url(str(request.param))


@pytest.fixture
def memory_url() -> str:
    return f"memory://asgi-{uuid.uuid4().hex[:10]}"


async def _pair(url: str, pace: float = PACE) -> AsyncIterator[tuple[Replica, Replica]]:
    a = await Replica(make_app(url, pace=pace)).start()
    b = await Replica(make_app(url, pace=pace)).start()
    try:
        yield a, b
    finally:
        await asyncio.gather(a.stop(), b.stop())


@pytest.fixture
async def replicas(store_url: str) -> AsyncIterator[tuple[Replica, Replica]]:
    """Two replicas over one store, on each backend."""
    async for pair in _pair(store_url):
        yield pair


@pytest.fixture
def pace() -> float:
    """Seconds per word of the memory replicas' answers (a test that needs a turn still
    running while it acts parametrizes a slower one)."""
    return 0.002


@pytest.fixture
async def memory_replicas(memory_url: str, pace: float) -> AsyncIterator[tuple[Replica, Replica]]:
    """Two replicas over one in-memory store (for what no backend changes)."""
    async for pair in _pair(memory_url, pace):
        yield pair


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def alice(tenant: str) -> Caller:
    return Caller(tenant, "alice")
