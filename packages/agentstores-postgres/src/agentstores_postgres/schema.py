"""``agentstores schema install``: create or migrate the schema and grant the runtime role.

``agentstores schema install URL --schema S --runtime-role R`` (or :func:`install`) runs as
an administrator: it creates schema ``S``, applies every migration newer than the version
recorded in ``S.schema_version`` and records the new version, applies every function
whose definition changed since it was installed (all in one transaction, under an
advisory lock so two installers never interleave), and grants ``R`` exactly what the
adapter uses: ``USAGE`` on the schema, ``SELECT`` on the version marker, ``SELECT, INSERT,
UPDATE, DELETE`` on the data tables and ``EXECUTE`` on the functions. Running it again
migrates forward; it never runs backward. The migrations are in
:mod:`agentstores_postgres.migrations`, the functions in
:mod:`agentstores_postgres.functions`, the check the adapter runs at open in
:mod:`agentstores_postgres.schema_check`.
"""

from __future__ import annotations

from agentstores.errors import BackendUnavailableError, UsageError

from .functions import install_functions
from .migrations import (
    DATA_TABLES,
    MARKER,
    SCHEMA_VERSION,
    TABLE_PRIVILEGES,
    check_identifier,
    grant_statements,
    migrate,
    present_tables,
    quote_ident,
)
from .urls import DEFAULT_SCHEMA, parse_url


async def install(
    url: str,
    *,
    schema: str | None = None,
    runtime_role: str | None = None,
    target_version: int | None = None,
) -> str:
    """Create or migrate ``schema`` forward and grant ``runtime_role``; returns a summary.

    ``schema`` defaults to the URL's ``?schema=`` option, else ``agentstores``.
    ``target_version`` (default: the latest) exists to install an older version on
    purpose, e.g. to test a migration; the functions, which are this version's, are
    applied only when the tables reach it.
    """
    import asyncpg

    config = parse_url(url)
    schema = check_identifier(schema or config.schema or DEFAULT_SCHEMA, "schema")
    if runtime_role is not None:
        check_identifier(runtime_role, "runtime role")
    target = SCHEMA_VERSION if target_version is None else target_version
    if not 1 <= target <= SCHEMA_VERSION:
        raise UsageError(f"target_version must be between 1 and {SCHEMA_VERSION}")
    try:
        conn = await asyncpg.connect(config.dsn)
    except Exception as exc:
        raise BackendUnavailableError(f"cannot connect to PostgreSQL to install: {exc}") from exc
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('agentstores.schema:' || $1::text))",
                schema,
            )
            if runtime_role is not None:
                found = await conn.fetchval(
                    "SELECT 1 FROM pg_roles WHERE rolname = $1", runtime_role
                )
                if not found:
                    raise UsageError(
                        f"role {runtime_role!r} does not exist; create it first "
                        f'(CREATE ROLE "{runtime_role}" LOGIN PASSWORD ...)'
                    )
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
            before, after, applied = await migrate(conn, schema, target)
            functions: list[str] | None = None
            if after == SCHEMA_VERSION:
                functions = await install_functions(conn, schema)
            if runtime_role is not None:
                tables = await present_tables(conn, schema)
                for statement in grant_statements(schema, runtime_role, tables):
                    await conn.execute(statement)
    finally:
        await conn.close()
    lines = [f"schema {schema}: version {before} -> {after}"]
    lines.append("applied " + ", ".join(applied) if applied else "nothing to migrate")
    if functions is None:
        lines.append(f"functions not applied (they need version {SCHEMA_VERSION})")
    elif functions:
        lines.append("functions applied: " + ", ".join(functions))
    else:
        lines.append("functions unchanged")
    if runtime_role is not None:
        lines.append(
            f"runtime role {runtime_role}: USAGE on the schema, SELECT on {MARKER}, "
            f"{', '.join(TABLE_PRIVILEGES)} on {len(DATA_TABLES)} tables, "
            "EXECUTE on the functions"
        )
    return "; ".join(lines)
