"""``agentstores schema install`` and the check at open, each on a schema of its own.

What must hold: install prints what it did in one fixed form (the migrations run, the
functions applied, what the runtime role was granted); run again, it applies exactly the
functions that are not this version's, whichever of them they are, and replaces one whose
signature an older release left different (CREATE OR REPLACE cannot) with one function
the runtime role may still run; a runtime role that lost a privilege cannot open the
bundle, and the refusal names each privilege it lacks; a runtime role's name that is not
a plain identifier is refused by name before anything connects.
"""

from __future__ import annotations

from collections.abc import Iterator

import asyncpg
import pytest

from agentstores.errors import BackendUnavailableError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow
from agentstores_postgres.functions import FUNCTIONS, MARK_PREFIX
from agentstores_postgres.migrations import DATA_TABLES, MIGRATIONS, SCHEMA_VERSION
from agentstores_postgres.schema import install
from agentstores_postgres.stores import PostgresStores
from tests.servers.postgres import Installation, free_port, run_as_admin

from .conftest import PgServer


@pytest.fixture
def bare(pg: PgServer) -> Iterator[Installation]:
    """A runtime role and a schema name of this test's own, nothing installed."""
    with Installation(pg.admin_url, install=False, prefix="inst") as inst:
        yield inst


async def _refused(url: str) -> BackendUnavailableError:
    """The refusal of an open, which must leave no pool behind (so nothing can be written)."""
    stores = PostgresStores(url, push=False)
    with pytest.raises(BackendUnavailableError) as info:
        await stores.open()
    assert stores.db.pool is None, "a refused open must not leave a pool behind"
    return info.value


async def _works(url: str) -> None:
    """The runtime role opens the bundle (the check at open passes) and writes."""
    async with PostgresStores(url, push=False) as stores:
        key = ConversationKey("t", "install")
        assert await stores.supervision.compare_and_swap(
            key, "u", None, SupervisionRow("running", "m", 1)
        )


async def _overloads(pg: PgServer, schema: str, name: str, role: str) -> list[tuple[str, bool]]:
    """Each function ``name`` in ``schema``: its signature with its result type, and whether
    ``role`` may run it."""
    conn = await asyncpg.connect(pg.admin_url)
    try:
        rows = await conn.fetch(
            "SELECT p.oid::regprocedure::text || ' -> ' || pg_get_function_result(p.oid) AS sig,"
            " has_function_privilege($3, p.oid, 'EXECUTE') AS ok "
            "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = $1 AND p.proname = $2",
            schema,
            name,
            role,
        )
    finally:
        await conn.close()
    return [(r["sig"], r["ok"]) for r in rows]


async def test_install_prints_what_it_did_in_one_fixed_form(
    pg: PgServer, bare: Installation
) -> None:
    """What `agentstores schema install` prints, first on an empty schema, then again."""
    s, r = bare.schema, bare.role
    first = await install(pg.admin_url, schema=s, runtime_role=r)
    migrations = ", ".join(f"{m.version} ({m.description})" for m in MIGRATIONS)
    granted = (
        f"runtime role {r}: USAGE on the schema, SELECT on schema_version, "
        f"SELECT, INSERT, UPDATE, DELETE on {len(DATA_TABLES)} tables, "
        "EXECUTE on the functions"
    )
    assert first == (
        f"schema {s}: version 0 -> {SCHEMA_VERSION}; applied {migrations}; "
        f"functions applied: {', '.join(FUNCTIONS)}; {granted}"
    )
    assert FUNCTIONS[:2] == ("check_write", "claim_header")
    assert first.count("functions applied: check_write, claim_header, commit_write, ") == 1
    again = await install(pg.admin_url, schema=s)
    assert again == (
        f"schema {s}: version {SCHEMA_VERSION} -> {SCHEMA_VERSION}; nothing to migrate; "
        "functions unchanged"
    )
    await _works(bare.url)


async def test_install_applies_every_function_not_current_past_current_ones(
    pg: PgServer, bare: Installation
) -> None:
    """Functions that are current come before (check_write, first of all) and between the
    ones that are not: install applies each that is not, and only those."""
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    s = f'"{bare.schema}"'
    await run_as_admin(
        pg.admin_url,
        f"COMMENT ON FUNCTION {s}.conv_share IS 'edited by hand'",
        f"DROP FUNCTION {s}.wake",
    )
    refused = await _refused(bare.url)
    assert refused.context["functions"] == ["conv_share (differs)", "wake (absent)"]
    summary = await install(pg.admin_url, schema=bare.schema)  # no --runtime-role
    assert summary == (
        f"schema {bare.schema}: version {SCHEMA_VERSION} -> {SCHEMA_VERSION}; "
        "nothing to migrate; functions applied: conv_share, wake"
    )
    assert await _overloads(pg, bare.schema, "wake", bare.role) == [
        (f"{bare.schema}.wake(text,text) -> boolean", True)
    ]
    await _works(bare.url)
    assert (await install(pg.admin_url, schema=bare.schema)).endswith("functions unchanged")


@pytest.mark.parametrize(
    "older",
    [
        pytest.param(
            "(t text, s text, tok text, p text, n uuid, ttl interval) RETURNS integer "
            "LANGUAGE sql AS 'SELECT 1'",
            id="result-type",
        ),
        pytest.param(
            "(tenant text, s text, tok text, p text, n uuid, ttl interval) RETURNS void "
            "LANGUAGE plpgsql AS 'BEGIN END'",
            id="parameter-name",
        ),
    ],
)
async def test_a_function_an_older_release_left_with_another_signature_is_replaced(
    pg: PgServer, bare: Installation, older: str
) -> None:
    """CREATE OR REPLACE refuses to change a function's result type or parameter names
    (42P13): install drops the older token_abandon and creates this version's, one
    function, which the runtime role may still run."""
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    s = f'"{bare.schema}"'
    await run_as_admin(
        pg.admin_url,
        f"DROP FUNCTION {s}.token_abandon",
        f"CREATE FUNCTION {s}.token_abandon{older}",
        f"REVOKE ALL ON FUNCTION {s}.token_abandon FROM PUBLIC",
        f'GRANT EXECUTE ON FUNCTION {s}.token_abandon TO "{bare.role}"',
        f"COMMENT ON FUNCTION {s}.token_abandon IS "
        f"'{MARK_PREFIX}sql/functions/token_abandon.sql 0123456789abcdef'",
    )
    refused = await _refused(bare.url)
    assert refused.context["functions"] == ["token_abandon (differs)"]
    summary = await install(pg.admin_url, schema=bare.schema)  # no --runtime-role
    assert summary.endswith("nothing to migrate; functions applied: token_abandon")
    assert await _overloads(pg, bare.schema, "token_abandon", bare.role) == [
        (f"{bare.schema}.token_abandon(text,text,text,text,uuid,interval) -> void", True)
    ]
    await _works(bare.url)


async def test_a_runtime_role_missing_a_privilege_is_refused_naming_each(
    pg: PgServer, bare: Installation
) -> None:
    """The check at open names every privilege the runtime role lacks (tables first) and
    the command that grants them; install with the role grants them back."""
    await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
    s, r = bare.schema, bare.role
    await run_as_admin(
        pg.admin_url,
        f'REVOKE INSERT ON "{s}".messages FROM "{r}"',
        f'REVOKE EXECUTE ON FUNCTION "{s}".wake FROM "{r}"',
    )
    refused = await _refused(bare.url)
    missing = [f"INSERT on {s}.messages", f"EXECUTE on {s}.wake"]
    assert refused.context["missing"] == missing
    assert str(refused) == (
        f"role {r!r} lacks {', '.join(missing)}: run `agentstores schema install URL "
        f"--schema {s} --runtime-role <this role>` as an administrator"
    )
    await install(pg.admin_url, schema=s, runtime_role=r)
    await _works(bare.url)


@pytest.mark.parametrize("role", ['rt"x', "rt\x00x", "bad-name;drop", "", "r" * 64, "rt\n"])
async def test_a_runtime_role_that_is_not_a_plain_identifier_is_refused_by_name(
    role: str,
) -> None:
    """Refused before connecting (the port is closed), the message saying which name."""
    with pytest.raises(UsageError) as refused:
        await install(f"postgresql://admin@127.0.0.1:{free_port()}/db", runtime_role=role)
    assert str(refused.value).startswith("runtime role must be a plain identifier")
    assert repr(role) in str(refused.value)


@pytest.mark.parametrize("schema", ["nl\n", "a\nb"])
async def test_a_schema_name_with_a_newline_is_refused(schema: str) -> None:
    """A newline is no part of a plain identifier, at the end of the name included (a
    pattern's ``$`` matches before a final newline: the check matches the whole name)."""
    with pytest.raises(UsageError, match="schema must be a plain identifier"):
        await install(f"postgresql://admin@127.0.0.1:{free_port()}/db", schema=schema)
