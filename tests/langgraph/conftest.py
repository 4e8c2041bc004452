"""Fixtures for the LangGraph tests: every test that takes ``backend`` runs on each one."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from agentstores import EphemeralStoreWarning

from .backends import BACKENDS, Servers, servers

warnings.filterwarnings("ignore", category=EphemeralStoreWarning)


@pytest.fixture(scope="session")
def lg_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with servers(tmp_path_factory.mktemp("lg")) as s:
        yield s


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, lg_servers: Servers) -> str:
    """A backend name; its server is made ready here, outside any event loop."""
    name = str(request.param)
    lg_servers.url(name)
    return name


@pytest.fixture
def pg_admin(lg_servers: Servers) -> str:
    """A PostgreSQL superuser URL (for LangGraph's own saver), ready outside the loop."""
    return lg_servers.pg_admin
