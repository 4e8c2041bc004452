"""PostgreSQL fixtures: one private PostgreSQL 18 per session, one private server from the
machine's own PostgreSQL programs when they are installed, and the server named by
``$AGENTSTORES_TEST_POSTGRES_URL`` when set; a fresh schema and runtime role per server.

Every test that takes ``pg`` runs once per server. A server this machine does not have is
not in the parameter list (nothing is skipped) and the run's summary names it as not run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.servers.postgres import (
    ENV_URL,
    EmbeddedPostgres,
    Installation,
    server_version,
    system_binaries,
)
from tests.servers.shared import shared_url
from tests.servers.variants import not_run

SHARED = shared_url()
"""A mutation run's PostgreSQL, standing in for this session's: see
:mod:`tests.servers.shared`."""
MACHINE_BINARIES = system_binaries()
MACHINE = f"machine-pg{server_version(MACHINE_BINARIES)}" if MACHINE_BINARIES else None
SERVERS = ["embedded-pg18"]
if SHARED:  # one server for the whole mutation run: the other variants need their own
    SERVERS = ["shared"]
else:
    if MACHINE:
        SERVERS.append(MACHINE)
    else:
        not_run("the machine's PostgreSQL", "no PostgreSQL server programs are installed here")
    if os.environ.get(ENV_URL):
        SERVERS.append("env")
    else:
        not_run("an external PostgreSQL", f"${ENV_URL} does not name one")


@dataclass
class PgServer:
    """A server under test: its superuser URL, a ready installation, and (when we run
    it ourselves) the handle that can restart it."""

    name: str
    admin_url: str
    installation: Installation
    embedded: EmbeddedPostgres | None

    @property
    def url(self) -> str:
        """The runtime role's URL, naming the installed schema."""
        return self.installation.url


@pytest.fixture(scope="session", params=SERVERS)
def pg(request: pytest.FixtureRequest) -> Iterator[PgServer]:
    if request.param in ("env", "shared"):
        admin = SHARED or os.environ[ENV_URL]
        with Installation(admin) as inst:
            yield PgServer(request.param, admin, inst, None)
        return
    bindir = MACHINE_BINARIES if request.param == MACHINE else None
    with EmbeddedPostgres(bindir=bindir) as server, Installation(server.url) as inst:
        yield PgServer(request.param, server.url, inst, server)
