"""Fixtures every framework bridge's tests share: ``backend`` runs a test once per backend.

A bridge's ``conftest.py`` imports them (``from tests.servers.bridges import *``); the
servers start once per session, on first use, outside any event loop.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from agentstores import EphemeralStoreWarning
from tests.servers.backends import BACKENDS, Servers, servers

__all__ = ["backend", "bridge_servers", "pg_admin"]

warnings.filterwarnings("ignore", category=EphemeralStoreWarning)


@pytest.fixture(scope="session")
def bridge_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with servers(tmp_path_factory.mktemp("bridge")) as s:
        yield s


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, bridge_servers: Servers) -> str:
    """A backend name; its server is made ready here, outside any event loop."""
    name = str(request.param)
    bridge_servers.url(name)
    return name


@pytest.fixture
def pg_admin(bridge_servers: Servers) -> str:
    """A PostgreSQL superuser URL (for a framework's own store), ready outside the loop."""
    return bridge_servers.pg_admin
