"""A password in a PostgreSQL URL never shows: not in the config's or the bundle's
``repr``, not in the errors of opening it (nothing listening, a wrong password refused
by a real server, an unknown role or database), their cause chains and context, nor the
log records."""

from __future__ import annotations

import logging
import uuid

import asyncpg
import pytest

from agentstores.errors import AgentStoresError, BackendUnavailableError, UsageError
from agentstores_postgres.stores import PostgresStores
from agentstores_postgres.urls import parse_url
from tests.leaks import SECRET, assert_hidden
from tests.postgres.conftest import PgServer
from tests.servers.postgres import with_query, with_user
from tests.servers.process import free_port


async def refused(url: str, caplog: pytest.LogCaptureFixture) -> AgentStoresError:
    """Open ``url``, expecting a typed error; check the secret shows nowhere."""
    caplog.set_level(logging.DEBUG)
    stores = PostgresStores(url, acquire_timeout=2)
    with pytest.raises(AgentStoresError) as caught:
        async with stores:
            pass
    assert_hidden(error=caught.value, records=caplog.records, objects=[stores, stores.config])
    return caught.value


def with_password(url: str, user: str, password: str = SECRET) -> str:
    return with_user(url, user).replace(f"{user}@", f"{user}:{password}@", 1)


@pytest.mark.parametrize(
    "template",
    [
        "postgresql://app:{pw}@127.0.0.1:{port}/chat",
        "postgres://app@127.0.0.1:{port}/chat?password={pw}",
        "postgresql://app@127.0.0.1:{port}/chat?sslmode=require&sslpassword={pw}",
    ],
)
async def test_nothing_listening(template: str, caplog: pytest.LogCaptureFixture) -> None:
    error = await refused(template.format(pw=SECRET, port=free_port()), caplog)
    assert isinstance(error, BackendUnavailableError)


@pytest.mark.parametrize("pg", ["embedded-pg18"], indirect=True)  # its pg_hba.conf is ours
async def test_wrong_password(pg: PgServer, caplog: pytest.LogCaptureFixture) -> None:
    """A role that must give a password, given the wrong one: the server refuses it."""
    assert pg.embedded is not None
    role = f"astest_locked_{uuid.uuid4().hex[:8]}"
    hba = pg.embedded.pgdata / "pg_hba.conf"
    before = hba.read_text()
    admin = await asyncpg.connect(pg.admin_url)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'the-right-one'")
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n{before}")
        await admin.execute("SELECT pg_reload_conf()")
        error = await refused(with_password(pg.admin_url, role), caplog)
        assert "password authentication failed" in str(error)
    finally:
        hba.write_text(before)
        await admin.execute("SELECT pg_reload_conf()")
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


@pytest.mark.parametrize("what", ["role", "database"])
async def test_refused_by_the_server(
    what: str, pg: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    if what == "role":
        url = with_password(pg.admin_url, f"no_such_role_{uuid.uuid4().hex[:6]}")
    else:
        url = with_password(pg.admin_url, "postgres").rsplit("/", 1)[0] + "/no_such_db"
    await refused(url, caplog)


def test_config_repr_masks_the_password() -> None:
    config = parse_url(
        f"postgresql://app:{SECRET}@db:5432/chat?sslpassword={SECRET}&schema=s&sslmode=require"
    )
    assert_hidden(objects=[config, PostgresStores(config.dsn)])
    assert repr(config).startswith("Config(dsn='postgresql://app:***@db:5432/chat?")
    assert "schema='s'" in repr(config)
    assert config.dsn.count(SECRET) == 2  # the driver still gets it


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{SECRET}@db/chat?no_such_option=1",
        f"postgresql://app:{SECRET}@db/chat?pool_max_size=many",
        f"mysql://app:{SECRET}@db/chat",
        with_query(f"postgresql://app:{SECRET}@db/chat", pool_min_size="5", pool_max_size="2"),
    ],
)
def test_url_usage_errors(url: str) -> None:
    with pytest.raises(UsageError) as caught:
        PostgresStores(url)
    assert_hidden(error=caught.value)
