"""Schema ownership: install and migrate as an administrator, refuse to start otherwise.

The runtime role gets exactly what the adapter uses; the adapter runs no DDL and names
what is missing when the schema is absent, unmarked, older, newer or not granted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import pytest

from agentstores.cli import main as cli_main
from agentstores.errors import BackendUnavailableError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow
from agentstores_postgres.migrations import FUNCTIONS, MIGRATIONS, SCHEMA_VERSION, fingerprint
from agentstores_postgres.schema import install
from agentstores_postgres.stores import PostgresStores
from tests.servers.postgres import Installation, with_query

from .conftest import PgServer


@pytest.fixture
def bare(pg: PgServer) -> Iterator[Installation]:
    """A runtime role and a schema name, nothing installed."""
    with Installation(pg.admin_url, install=False) as inst:
        yield inst


async def _admin(pg: PgServer, *sql: str) -> None:
    conn = await asyncpg.connect(pg.admin_url)
    try:
        for statement in sql:
            await conn.execute(statement)
    finally:
        await conn.close()


async def _open_error(url: str) -> str:
    stores = PostgresStores(url)
    with pytest.raises(BackendUnavailableError) as info:
        await stores.open()
    assert stores.db.pool is None, "a refused open must not leave a pool behind"
    return str(info.value)


async def _works(url: str) -> None:
    async with PostgresStores(url) as stores:
        key = ConversationKey("t", "schema-check")
        row = SupervisionRow("running", "m", 1)
        assert await stores.supervision.compare_and_swap(key, "u", None, row)


async def test_missing_schema_is_refused_by_name(bare: Installation) -> None:
    message = await _open_error(bare.url)
    assert bare.schema in message and "does not exist" in message
    assert "agentstores schema install" in message


async def test_schema_without_marker_is_refused(pg: PgServer, bare: Installation) -> None:
    await _admin(
        pg,
        f'CREATE SCHEMA "{bare.schema}"',
        f'GRANT USAGE ON SCHEMA "{bare.schema}" TO "{bare.role}"',
    )
    message = await _open_error(bare.url)
    assert "version marker" in message and "not installed" in message


async def test_schema_without_usage_is_refused(pg: PgServer, bare: Installation) -> None:
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    await _admin(pg, f'REVOKE USAGE ON SCHEMA "{bare.schema}" FROM "{bare.role}"')
    message = await _open_error(bare.url)
    assert "lacks USAGE" in message


async def test_older_schema_is_refused_then_migrated_forward(
    pg: PgServer, bare: Installation
) -> None:
    first = await install(
        pg.admin_url, schema=bare.schema, runtime_role=bare.role, target_version=1
    )
    assert "version 0 -> 1" in first
    message = await _open_error(bare.url)
    assert f"version 1; this adapter needs {SCHEMA_VERSION}" in message
    assert "migrate it forward" in message
    # The same command, run again, migrates forward (through the CLI this time).
    code = await asyncio.to_thread(
        cli_main,
        ["schema", "install", pg.admin_url, "--schema", bare.schema, "--runtime-role", bare.role],
    )
    assert code == 0
    await _works(bare.url)
    again = await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    assert f"version {SCHEMA_VERSION} -> {SCHEMA_VERSION}" in again
    assert "nothing to migrate" in again


async def test_newer_schema_is_refused(pg: PgServer, bare: Installation) -> None:
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    await _admin(pg, f'UPDATE "{bare.schema}".schema_version SET version = 99')
    message = await _open_error(bare.url)
    assert "newer than this adapter" in message
    with pytest.raises(UsageError, match="newer than this adapter"):
        await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)


async def test_schema_from_other_definitions_is_refused(pg: PgServer, bare: Installation) -> None:
    """Same version number, different definitions (e.g. an unreleased build): refused."""
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    await _admin(pg, f"UPDATE \"{bare.schema}\".schema_version SET fingerprint = 'elsewhere'")
    message = await _open_error(bare.url)
    assert "installed from other definitions" in message and "elsewhere" in message
    with pytest.raises(UsageError, match="installed from other definitions"):
        await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)


@pytest.mark.parametrize(
    ("revoke", "named"),
    [
        ('REVOKE UPDATE ON "{s}".supervision FROM "{r}"', "UPDATE on {s}.supervision"),
        ('REVOKE DELETE ON "{s}".messages FROM "{r}"', "DELETE on {s}.messages"),
        ('REVOKE SELECT ON "{s}".schema_version FROM "{r}"', "SELECT on {s}.schema_version"),
        (
            'REVOKE EXECUTE ON FUNCTION "{s}".conv_append FROM "{r}"',
            "EXECUTE on {s}.conv_append",
        ),
    ],
)
async def test_missing_privilege_is_refused_by_name(
    pg: PgServer, bare: Installation, revoke: str, named: str
) -> None:
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    await _works(bare.url)
    await _admin(pg, revoke.format(s=bare.schema, r=bare.role))
    message = await _open_error(bare.url)
    assert named.format(s=bare.schema) in message


async def test_runtime_role_holds_only_what_it_needs(pg: PgServer) -> None:
    url = pg.url
    schema = pg.installation.schema
    conn = await asyncpg.connect(url.split("?")[0])
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f'CREATE TABLE "{schema}".intruder (x int)')
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f'TRUNCATE "{schema}".messages')
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f'UPDATE "{schema}".schema_version SET version = 1')
        granted = await conn.fetch(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = $1 AND has_function_privilege(p.oid, 'EXECUTE')",
            schema,
        )
        assert {r["proname"] for r in granted} == set(FUNCTIONS)
    finally:
        await conn.close()
    # PUBLIC gets nothing: a role that was never granted cannot execute the functions.
    async with Installation(pg.admin_url, install=False) as stranger:
        other = await asyncpg.connect(stranger.url.split("?")[0])
        try:
            ok = await other.fetchval(
                "SELECT bool_or(has_function_privilege(p.oid, 'EXECUTE')) FROM pg_proc p "
                "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1",
                schema,
            )
            assert ok is False
        finally:
            await other.close()


async def test_concurrent_installers_serialize(pg: PgServer, bare: Installation) -> None:
    summaries = await asyncio.gather(
        *(install(pg.admin_url, schema=bare.schema, runtime_role=bare.role) for _ in range(3))
    )
    assert sum("version 0 ->" in s for s in summaries) == 1
    await _works(bare.url)


async def test_url_options_are_stripped_and_pgbouncer_mode_works(pg: PgServer) -> None:
    url = with_query(pg.url, pgbouncer="true", pool_max_size="2", application_name="probe")
    stores = PostgresStores(url)
    assert "schema=" not in stores.config.dsn and "pgbouncer" not in stores.config.dsn
    assert "application_name=probe" in stores.config.dsn
    assert stores.config.pgbouncer and stores.config.pool_max_size == 2
    async with stores:
        key = ConversationKey("t", "pgbouncer-mode")
        for epoch in range(1, 4):
            expected = None if epoch == 1 else epoch - 1
            row = SupervisionRow("running", "m", epoch)
            assert await stores.supervision.compare_and_swap(key, "u", expected, row)
        assert (await stores.supervision.read(key, "u")).row.epoch == 3  # type: ignore[union-attr]


def test_bad_names_and_options_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        PostgresStores("postgresql://u@h/db?schema=bad-name;drop")
    with pytest.raises(UsageError):
        PostgresStores("postgresql://u@h/db", pool_max_size=0)
    with pytest.raises(UsageError):
        PostgresStores("postgresql://u@h/db", no_such_option=1)
    with pytest.raises(UsageError):
        PostgresStores("mysql://u@h/db")


RELEASED_FINGERPRINTS = {
    1: "2de620ef9c3f24c5",
    2: "843b57d6c86d5539",
    3: "809da028dc80d851",
    4: "a0e2ad1c1968a33a",
    5: "8de013772043e249",
    6: "bd530f9ddf33edf6",
}
"""What installed schemas record: a released migration file must never change."""


def test_released_migrations_are_unchanged() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))
    for version, recorded in RELEASED_FINGERPRINTS.items():
        assert fingerprint(version) == recorded, f"migration {version} was edited"


@pytest.mark.parametrize("written_at", [3, 4, 5])
async def test_a_conversation_written_by_an_older_conv_append_goes_on_after_migrating(
    pg: PgServer, bare: Installation, written_at: int
) -> None:
    """Migrations 4, 5 and 6 replace conv_append: a transcript written by an older function
    keeps its positions, counters, tail and metadata, and its ids stay idempotent."""
    import uuid
    from datetime import timedelta

    from agentstores.models import Message
    from agentstores.stores import MAX_CONVERSATION_METADATA_BYTES
    from agentstores_postgres import conversations as conv_sql

    await install(
        pg.admin_url, schema=bare.schema, runtime_role=bare.role, target_version=written_at
    )
    conn = await asyncpg.connect(pg.admin_url)
    try:
        await conn.fetchrow(
            conv_sql._APPEND.replace("__S__", f'"{bare.schema}"'),
            "t",
            "migrated",
            "u",
            ["q1", "a1", "x1"],
            ["user", "assistant", "tool"],
            [b'"q"', b'"a"', b'"x"'],
            [b"{}", b"{}", b"{}"],
            [False, False, False],
            True,
            "complete",
            True,
            None,
            2,
            "old",
            None,
            uuid.uuid4(),
            timedelta(days=30),
            '{"kept": "1"}',
            MAX_CONVERSATION_METADATA_BYTES,
        )
    finally:
        await conn.close()
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    key = ConversationKey("t", "migrated")
    async with PostgresStores(bare.url) as stores:
        conv = stores.conversations
        assert await conv.append_messages(key, "u", [Message("a1", "assistant", "a")]) == []
        stored = await conv.append_messages(
            key,
            "u",
            [Message("q2", "user", "q"), Message("a2", "assistant", "a")],
            expected_tail="x1",
            epoch=2,
            metadata={"added": 2},
        )
        assert [m.seq for m in stored] == [3, 4]
        info = await conv.get_conversation(key, "u")
        assert info is not None
        assert (info.message_count, info.tail_message_id, info.title) == (5, "a2", "old")
        assert dict(info.metadata) == {"kept": 1, "added": 2}
        users = await conv.get_transcript(key, "u", speaker="user")
        assert [(m.index, m.id) for m in users] == [(0, "q1"), (1, "q2")]
        turns = await conv.recent(key, "u", 3)
        assert [m.id for m in turns] == ["a1", "q2", "a2"]
