"""``agentstores check`` on PostgreSQL that cannot be used: exit 2 with one line carrying
the driver's reason (closed port, unknown role, missing schema, unknown URL option)."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import parse_qsl, urlsplit

import pytest

from agentstores.errors import UsageError
from agentstores_postgres.urls import parse_url
from tests.postgres.conftest import PgServer
from tests.servers.postgres import free_port, with_query, with_user


def check(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentstores.cli", "check", url, "--profile", "quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == "", "nothing ran, so there is no header and no table"
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_a_closed_port_is_one_line_with_the_drivers_reason() -> None:
    line = one_line(check(f"postgresql://x@127.0.0.1:{free_port()}/db"))
    assert "cannot reach" in line and "Connect call failed" in line, line


def test_an_unknown_role_is_one_line_with_the_servers_reason(pg: PgServer) -> None:
    line = one_line(check(with_user(pg.admin_url, "nosuchuser")))
    assert 'role "nosuchuser" does not exist' in line, line


def test_a_missing_schema_is_one_line_saying_how_to_install_it(pg: PgServer) -> None:
    line = one_line(check(with_query(pg.url, schema="nosuchschema")))
    assert "schema 'nosuchschema' does not exist" in line and "schema install" in line, line


def test_an_unknown_url_option_is_refused_before_connecting() -> None:
    line = one_line(check(f"postgresql://x@127.0.0.1:{free_port()}/db?pool_max=3"))
    assert "unknown PostgreSQL URL option 'pool_max'" in line and "pool_max_size" in line
    assert "cannot reach" not in line, "refused when the URL was parsed, before connecting"


@pytest.mark.parametrize(
    "query",
    ["sslmode=disable", "application_name=a", "options=-c%20statement_timeout%3D5s", "port=1"],
)
def test_driver_parameters_still_reach_asyncpg(query: str) -> None:
    config = parse_url(f"postgresql://u@h/db?schema=s&{query}")
    assert parse_qsl(urlsplit(config.dsn).query) == parse_qsl(query) and config.schema == "s"


def test_anything_else_would_reach_the_server_as_a_setting_so_it_is_refused() -> None:
    with pytest.raises(UsageError, match=r"'connect_timeout'.*options=-c name=value") as refused:
        parse_url("postgresql://u@h/db?connect_timeout=5")
    assert refused.value.context["option"] == "connect_timeout"


def test_every_call_has_a_reply_timeout_by_default() -> None:
    """A server that keeps the connection open and answers nothing (a blackholed network)
    must not hold a call forever: statements time out after 30 s unless the URL says."""
    assert parse_url("postgresql://u@h/db").command_timeout == 30.0
    assert parse_url("postgresql://u@h/db?command_timeout=2.5").command_timeout == 2.5
