"""Schema ownership: install and migrate as an administrator, refuse to start otherwise.

The runtime role gets exactly what the adapter uses; the adapter runs no DDL and names
what is missing when the schema is absent, unmarked, older, newer or not granted.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from agentstores.cli import main as cli_main
from agentstores.errors import BackendUnavailableError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow
from agentstores_postgres.functions import DEFINITIONS, FUNCTIONS, FunctionDefinition
from agentstores_postgres.migrations import (
    MIGRATIONS,
    PREVIOUS_LAYOUT,
    SCHEMA_VERSION,
    fingerprint,
)
from agentstores_postgres.schema import install
from agentstores_postgres.stores import PostgresStores
from tests.servers.postgres import Installation, run_as_admin, with_query
from tests.tombstone_ttls import REFUSED, erase_then_write_late

from .conftest import PgServer
from .previous_layout import install_previous_layout, previous_fingerprint


@pytest.fixture
def bare(pg: PgServer) -> Iterator[Installation]:
    """A runtime role and a schema name, nothing installed."""
    with Installation(pg.admin_url, install=False) as inst:
        yield inst


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
        with stores.wakeups.watch(key):  # push: the watch rows are written too
            for _ in range(500):
                if stores.wakeups.pushing(key):
                    break
                await asyncio.sleep(0.02)
            assert stores.wakeups.pushing(key)


async def test_missing_schema_is_refused_by_name(bare: Installation) -> None:
    message = await _open_error(bare.url)
    assert bare.schema in message and "does not exist" in message
    assert "agentstores schema install" in message


async def test_schema_without_marker_is_refused(pg: PgServer, bare: Installation) -> None:
    await run_as_admin(
        pg.admin_url,
        f'CREATE SCHEMA "{bare.schema}"',
        f'GRANT USAGE ON SCHEMA "{bare.schema}" TO "{bare.role}"',
    )
    message = await _open_error(bare.url)
    assert "version marker" in message and "not installed" in message


async def test_schema_without_usage_is_refused(pg: PgServer, bare: Installation) -> None:
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    await run_as_admin(pg.admin_url, f'REVOKE USAGE ON SCHEMA "{bare.schema}" FROM "{bare.role}"')
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
    await run_as_admin(pg.admin_url, f'UPDATE "{bare.schema}".schema_version SET version = 99')
    message = await _open_error(bare.url)
    assert "newer than this adapter" in message
    with pytest.raises(UsageError, match="newer than this adapter"):
        await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)


async def test_schema_from_other_definitions_is_refused(pg: PgServer, bare: Installation) -> None:
    """Same version number, different definitions (e.g. an unreleased build): refused."""
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    await run_as_admin(
        pg.admin_url, f"UPDATE \"{bare.schema}\".schema_version SET fingerprint = 'elsewhere'"
    )
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
    await run_as_admin(pg.admin_url, revoke.format(s=bare.schema, r=bare.role))
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


@pytest.mark.parametrize(
    ("query", "options"),
    [*REFUSED, pytest.param("", {"tombstone_ttl": timedelta(days=3_000_000)}, id="3M-days")],
)
def test_a_bad_tombstone_ttl_is_refused_by_name_when_the_bundle_is_made(
    query: str, options: dict[str, object]
) -> None:
    """Before, a TTL past PostgreSQL's earliest timestamp opened, then failed the first
    append of a new key with "timestamp out of range", naming no option."""
    with pytest.raises(UsageError, match="tombstone_ttl") as refused:
        PostgresStores(f"postgresql://u@h/db{query}", **options)
    assert refused.value.context["option"] == "tombstone_ttl"


@pytest.mark.parametrize(
    ("query", "options", "ttl"),
    [
        pytest.param("3155760000", {}, timedelta(days=36_525), id="url-100y"),
        pytest.param(
            "", {"tombstone_ttl": timedelta(days=36_525)}, timedelta(days=36_525), id="100y"
        ),
        pytest.param("", {"tombstone_ttl": timedelta(seconds=1)}, timedelta(seconds=1), id="1s"),
    ],
)
async def test_a_tombstone_ttl_up_to_100_years_is_kept(
    pg: PgServer, query: str, options: dict[str, object], ttl: timedelta
) -> None:
    url = with_query(pg.url, tombstone_ttl=query) if query else pg.url
    async with PostgresStores(url, **options) as stores:
        assert stores.config.tombstone_ttl == ttl
        await erase_then_write_late(stores, ttl)


RELEASED_FINGERPRINTS = {
    1: "2de620ef9c3f24c5",
    3: "2377801cb3c8b702",
    8: "bf5e0758b982934d",
    9: "ad3e049c3454ac34",
}
"""What installed schemas record: a released migration file must never change."""


def test_released_migrations_are_unchanged() -> None:
    assert [m.version for m in MIGRATIONS] == sorted(RELEASED_FINGERPRINTS)
    for version, recorded in RELEASED_FINGERPRINTS.items():
        assert fingerprint(version) == recorded, f"migration {version} was edited"


def test_the_previous_layouts_fingerprints_are_what_its_schemas_record() -> None:
    assert {v: previous_fingerprint(v) for v in range(1, 8)} == PREVIOUS_LAYOUT


def test_migrations_hold_tables_and_every_function_its_own_file() -> None:
    for migration in MIGRATIONS:
        assert not re.search(r"\bFUNCTION\b", migration.sql, re.IGNORECASE), migration.version
    assert len(FUNCTIONS) == len(set(FUNCTIONS)) == len(DEFINITIONS) == 25


async def _functions(admin_url: str, schema: str, role: str) -> dict[str, tuple[int, bool]]:
    """Each function name in ``schema``: how many overloads, and whether ``role`` may run
    them all while PUBLIC may run none."""
    conn = await asyncpg.connect(admin_url)
    try:
        rows = await conn.fetch(
            "SELECT p.proname, count(*) AS n, "
            "bool_and(has_function_privilege($2, p.oid, 'EXECUTE')) AND NOT bool_or("
            "  EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner)))"
            "          a WHERE a.grantee = 0)) AS ok "
            "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = $1 GROUP BY p.proname",
            schema,
            role,
        )
    finally:
        await conn.close()
    return {r["proname"]: (r["n"], r["ok"]) for r in rows}


async def _install_over_previous_layout(pg: PgServer, bare: Installation, version: int) -> None:
    """The previous layout at ``version``, then this version's install (without naming the
    runtime role: it keeps what the old install granted it)."""
    await install_previous_layout(pg.admin_url, bare.schema, bare.role, version)
    message = await _open_error(bare.url)
    assert f"version {version}; this adapter needs {SCHEMA_VERSION}" in message
    summary = await install(pg.admin_url, schema=bare.schema)
    assert f"version {version} -> {SCHEMA_VERSION}" in summary
    assert "functions applied: " + ", ".join(FUNCTIONS) in summary
    assert await _functions(pg.admin_url, bare.schema, bare.role) == {
        name: (1, True) for name in FUNCTIONS
    }
    await _works(bare.url)  # a table a migration added is granted like the others
    again = await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    assert "nothing to migrate" in again and "functions unchanged" in again


@pytest.mark.parametrize("pg", ["embedded-pg18"], indirect=True)
async def test_the_last_previous_layout_upgrades_and_passes_the_suite(
    pg: PgServer, bare: Installation
) -> None:
    """Version 7: the last release that kept functions in its migrations. On PostgreSQL
    18 alone: the other upgrade tests run the same migrations on every server, and the
    whole suite runs on every server in test_contract.py."""
    await _install_over_previous_layout(pg, bare, 7)
    run = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agentstores.cli", "check", bare.url, "--profile", "quick"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr


async def test_a_function_whose_signature_changed_is_replaced_not_overloaded(
    pg: PgServer, bare: Installation
) -> None:
    """Version 2's conv_append took two arguments fewer: CREATE OR REPLACE would have
    added an overload beside it."""

    await _install_over_previous_layout(pg, bare, 2)
    async with PostgresStores(bare.url) as stores:
        key = ConversationKey("t", "from-version-2")
        stored = await stores.conversations.append_messages(
            key, "u", [Message.user("q")], metadata={"m": 1}
        )
        assert [m.seq for m in stored] == [0]
        info = await stores.conversations.get_conversation(key, "u")
        assert info is not None and dict(info.metadata) == {"m": 1}


async def test_only_a_changed_function_is_applied_again(pg: PgServer, bare: Installation) -> None:
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    s = f'"{bare.schema}"'
    # conv_share edited by hand, conv_set_title dropped, token_abandon given another result
    # type (CREATE OR REPLACE cannot undo that), and a stray overload of conv_truncate
    await run_as_admin(
        pg.admin_url,
        f"COMMENT ON FUNCTION {s}.conv_share IS 'edited by hand'",
        f"DROP FUNCTION {s}.conv_set_title",
        f"DROP FUNCTION {s}.token_abandon",
        f"CREATE FUNCTION {s}.token_abandon(t text, s text, tok text, p text, n uuid, "
        "ttl interval) RETURNS integer LANGUAGE sql AS 'SELECT 1'",
        f'GRANT EXECUTE ON FUNCTION {s}.token_abandon TO "{bare.role}"',
        f"CREATE FUNCTION {s}.conv_truncate(x integer) RETURNS integer LANGUAGE sql AS 'SELECT x'",
    )
    message = await _open_error(bare.url)
    assert "holds functions other than this adapter's" in message
    for named in ("conv_set_title (absent)", "conv_share (differs)", "token_abandon (differs)"):
        assert named in message
    assert "conv_truncate (" not in message, "its own definition is still there"
    summary = await install(pg.admin_url, schema=bare.schema)  # no --runtime-role
    applied = "conv_set_title, conv_share, conv_truncate, token_abandon"
    assert f"functions applied: {applied}" in summary
    assert await _functions(pg.admin_url, bare.schema, bare.role) == {
        name: (1, True) for name in FUNCTIONS
    }
    await _works(bare.url)
    assert "functions unchanged" in await install(pg.admin_url, schema=bare.schema)


@pytest.mark.parametrize("written_at", [3, 4, 5, 6, 7])
async def test_a_conversation_written_by_an_older_conv_append_goes_on_after_migrating(
    pg: PgServer, bare: Installation, written_at: int
) -> None:
    """Releases 4 to 7 replaced conv_append, and this one keeps it in its own file: a
    transcript written by an older function keeps its positions, counters, tail and
    metadata, and its ids stay idempotent."""
    from datetime import timedelta

    from agentstores.models import Message
    from agentstores.stores import MAX_CONVERSATION_METADATA_BYTES
    from agentstores_postgres import conversations as conv_sql

    await install_previous_layout(pg.admin_url, bare.schema, bare.role, written_at)
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


PREVIOUS_TRUNCATE = (Path(__file__).parent / "previous_conv_truncate.sql").read_text("utf-8")
"""conv_truncate as the release before ``expected_tail`` defined it (eight arguments), byte
for byte."""


async def test_the_previous_conv_truncate_is_replaced_and_its_callers_keep_working(
    pg: PgServer, bare: Installation
) -> None:
    """A schema at this version whose conv_truncate is the previous release's: the open is
    refused naming it, install replaces it (no overload left beside it, the runtime role
    keeps EXECUTE), the conditional truncate works, and an eight-argument call, as a
    process still running the previous release makes it, cuts unconditionally as it did
    (a seven-argument one, from the release before, by role)."""
    from datetime import timedelta

    from agentstores.errors import StaleWriteError
    from agentstores.models import Message
    from agentstores_postgres import conversations as conv_sql

    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    s = f'"{bare.schema}"'
    previous = FunctionDefinition("conv_truncate", PREVIOUS_TRUNCATE)
    await run_as_admin(
        pg.admin_url,
        f"DROP FUNCTION {s}.conv_truncate",
        previous.sql.replace("__S__", s),
        f"REVOKE ALL ON FUNCTION {s}.conv_truncate FROM PUBLIC",
        f'GRANT EXECUTE ON FUNCTION {s}.conv_truncate TO "{bare.role}"',
        f"COMMENT ON FUNCTION {s}.conv_truncate IS '{previous.mark}'",
    )
    message = await _open_error(bare.url)
    assert "conv_truncate (differs)" in message
    summary = await install(pg.admin_url, schema=bare.schema)  # no --runtime-role
    assert summary.endswith("nothing to migrate; functions applied: conv_truncate")
    assert await _functions(pg.admin_url, bare.schema, bare.role) == {
        name: (1, True) for name in FUNCTIONS
    }
    key = ConversationKey("t", "cut")
    turns = [Message(f"{r[0]}{i}", r, "x") for i in range(4) for r in ("user", "assistant")]
    async with PostgresStores(bare.url) as stores:
        conv = stores.conversations
        await conv.append_messages(key, "u", turns)
        with pytest.raises(StaleWriteError) as refused:
            await conv.truncate(key, "u", "a3", cut="before", expected_tail="u3")
        assert (refused.value.tail, refused.value.expected) == ("a3", "u3")
        assert await conv.truncate(key, "u", "a3", cut="before", expected_tail="a3") == 1
    conn = await asyncpg.connect(bare.url.split("?")[0])
    try:
        eight = conv_sql._TRUNCATE.replace(", $9)", ")").replace("__S__", s)
        args = ("t", "cut", "u", "a2", None, uuid.uuid4(), timedelta(days=1), "before")
        assert await conn.fetchval(eight, *args) == 2  # a2 and u3, no tail asked for
        seven = conv_sql._TRUNCATE.replace(", $8, $9)", ")").replace("__S__", s)
        args = ("t", "cut", "u", "u2", None, uuid.uuid4(), timedelta(days=1))
        assert await conn.fetchval(seven, *args) == 1  # by role: the user message goes
    finally:
        await conn.close()
    async with PostgresStores(bare.url) as stores:
        info = await stores.conversations.get_conversation(key, "u")
        assert info is not None
        assert (info.message_count, info.tail_message_id) == (4, "a1")


PREVIOUS_PUSH = Path(__file__).parent / "previous_push"
"""The functions that publish wake-ups, as the release before push defined them (no wake
function then), byte for byte."""


async def test_the_functions_before_push_are_replaced_and_then_publish(
    pg: PgServer, bare: Installation
) -> None:
    """A schema at this version whose writing functions are the previous release's: the
    open is refused naming each (and the absent wake), install applies exactly those, and
    the writes of a followed key publish afterwards. A process of the previous release sets
    no push setting, so the new functions publish nothing for it."""
    from agentstores_postgres.listener import CHANNEL, digest

    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    s = f'"{bare.schema}"'
    previous = [
        FunctionDefinition(path.stem, path.read_text("utf-8"))
        for path in sorted(PREVIOUS_PUSH.glob("*.sql"))
    ]
    statements = [f"DROP FUNCTION {s}.wake"]
    for d in previous:
        statements += [
            f"DROP FUNCTION {s}.{d.name}",
            d.sql.replace("__S__", s),
            f"REVOKE ALL ON FUNCTION {s}.{d.name} FROM PUBLIC",
            f'GRANT EXECUTE ON FUNCTION {s}.{d.name} TO "{bare.role}"',
            f"COMMENT ON FUNCTION {s}.{d.name} IS '{d.mark}'",
        ]
    await run_as_admin(pg.admin_url, *statements)
    message = await _open_error(bare.url)
    assert "wake (absent)" in message
    for d in previous:
        assert f"{d.name} (differs)" in message
    summary = await install(pg.admin_url, schema=bare.schema)
    names = ", ".join(sorted([d.name for d in previous] + ["wake"]))
    assert summary.endswith(f"nothing to migrate; functions applied: {names}")
    assert await _functions(pg.admin_url, bare.schema, bare.role) == {
        name: (1, True) for name in FUNCTIONS
    }
    key, old_key = ConversationKey("t", "pushed"), ConversationKey("t", "old")
    heard: list[str] = []
    listening = await asyncpg.connect(pg.admin_url)
    try:
        await listening.add_listener(CHANNEL, lambda *args: heard.append(args[3]))
        async with PostgresStores(bare.url) as stores:
            with stores.wakeups.watch(key), stores.wakeups.watch(old_key):
                for _ in range(500):
                    if stores.wakeups.pushing(key) and stores.wakeups.pushing(old_key):
                        break
                    await asyncio.sleep(0.02)
                old = await asyncpg.connect(bare.url.split("?")[0])  # no push setting
                try:
                    assert await old.fetchval(
                        f"SELECT {s}.sup_cas($1, $2, $3, NULL, 'running', 'm', 1, "
                        "gen_random_uuid(), interval '1 day')",
                        old_key.tenant,
                        old_key.session_id,
                        "u",
                    )
                finally:
                    await old.close()
                row = SupervisionRow("running", "m", 1)
                assert await stores.supervision.compare_and_swap(key, "u", None, row)
        await listening.fetchval("SELECT 1")
        await asyncio.sleep(0.1)
    finally:
        await listening.close()
    assert heard == [digest(bare.schema, key)]
