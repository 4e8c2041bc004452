"""Servers for the MongoDB backend's tests: nx-27017 started from its wheel, and a real
MongoDB when ``MONGODB_URI`` names one. Every run installs a fresh collection prefix and
drops its collections at the end (never the whole database)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from tests.servers.mongo import MONGODB_URI_ENV, Installation, NxServer
from tests.servers.shared import shared_port, shared_url
from tests.servers.variants import not_run

SHARED = shared_url()
"""A mutation run's nx-27017, standing in for this session's: see
:mod:`tests.servers.shared`."""


@pytest.fixture(scope="session")
def nx_server() -> Iterator[NxServer]:
    if SHARED:  # a handle on the run's server: never started or stopped here
        yield NxServer(port=shared_port(SHARED), directory=tempfile.gettempdir())
        return
    with NxServer() as server:
        yield server


REAL_MONGODB = os.environ.get(MONGODB_URI_ENV)
"""A real MongoDB, where ``MONGODB_URI`` names one (no MongoDB server installs from a
package index, so nothing else can start one)."""
if not REAL_MONGODB and not SHARED:
    not_run("a real MongoDB", f"${MONGODB_URI_ENV} does not name one")


@pytest.fixture(scope="session")
def real_mongodb() -> str:
    assert REAL_MONGODB, "only requested by tests collected when MONGODB_URI is set"
    return REAL_MONGODB


SERVERS = ("nx-27017", "mongodb") if REAL_MONGODB and not SHARED else ("nx-27017",)
"""Every server the tests run on: a real MongoDB only where ``MONGODB_URI`` names one."""


@pytest.fixture(params=SERVERS)
def server_name(request: pytest.FixtureRequest) -> str:
    """Each server by name: ``nx-27017``, and ``mongodb`` where ``MONGODB_URI`` is set."""
    return str(request.param)


@pytest.fixture
def base_url(server_name: str, request: pytest.FixtureRequest) -> str:
    """The base URL of each server (no prefix)."""
    if server_name == "nx-27017":
        return str(request.getfixturevalue("nx_server").url)
    return str(request.getfixturevalue("real_mongodb"))


@pytest.fixture
def installed(base_url: str) -> Iterator[Installation]:
    """A fresh installed prefix on each server, dropped after the test."""
    with Installation(base_url) as inst:
        yield inst
