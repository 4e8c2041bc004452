"""PostgreSQL fixtures: one private PostgreSQL 18 per session (plus the server named by
``$AGENTSTORES_TEST_POSTGRES_URL`` when set), a fresh schema and runtime role per server.

Every test that takes ``pg`` runs once per server; nothing is skipped when the env URL is
absent, the external server is simply not in the parameter list.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.servers.postgres import ENV_URL, EmbeddedPostgres, Installation

SERVERS = ["embedded-pg18"] + (["env"] if os.environ.get(ENV_URL) else [])


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
    if request.param == "env":
        admin = os.environ[ENV_URL]
        with Installation(admin) as inst:
            yield PgServer("env", admin, inst, None)
        return
    with EmbeddedPostgres() as server, Installation(server.url) as inst:
        yield PgServer(request.param, server.url, inst, server)
