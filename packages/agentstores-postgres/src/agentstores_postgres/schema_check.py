"""The check the adapter runs at open: it runs no DDL, and refuses to start unless the
schema is installed at this version (tables by their migrations' fingerprint, functions
by theirs) and the connected role holds every privilege the adapter uses, naming what is
missing, older, newer, different or not granted, and the install command that fixes it.
"""

from __future__ import annotations

from typing import Any

from agentstores.errors import BackendUnavailableError

from .functions import FUNCTIONS, differing
from .migrations import (
    DATA_TABLES,
    MARKER,
    SCHEMA_VERSION,
    TABLE_PRIVILEGES,
    fingerprint,
    quote_ident,
)


async def check(conn: Any, schema: str) -> int:
    """Refuse to run unless ``schema`` is installed at :data:`SCHEMA_VERSION` with this
    version's functions, and the connected role holds every privilege the adapter uses.
    Returns the version.

    Raises:
        BackendUnavailableError: naming what is missing, older, newer or not granted,
            and the install command that fixes it.
    """
    hint = (
        f"run `agentstores schema install URL --schema {schema} --runtime-role <this role>` "
        "as an administrator"
    )
    row = await conn.fetchrow(
        "SELECT n.oid IS NOT NULL AS exists, current_user AS who, "
        "CASE WHEN n.oid IS NULL THEN false ELSE has_schema_privilege(n.oid, 'USAGE') END "
        "AS usage FROM (SELECT 1) one LEFT JOIN pg_namespace n ON n.nspname = $1",
        schema,
    )
    who = row["who"]
    if not row["exists"]:
        raise BackendUnavailableError(
            f"PostgreSQL schema {schema!r} does not exist: {hint}", schema=schema
        )
    if not row["usage"]:
        raise BackendUnavailableError(
            f"role {who!r} lacks USAGE on schema {schema!r}: {hint}", schema=schema
        )
    marker = f"{quote_ident(schema)}.{MARKER}"
    present = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", marker)
    if not present:
        raise BackendUnavailableError(
            f"schema {schema!r} has no agentstores version marker ({MARKER}); it is not "
            f"installed: {hint}",
            schema=schema,
        )
    if not await conn.fetchval("SELECT has_table_privilege($1, 'SELECT')", marker):
        raise BackendUnavailableError(
            f"role {who!r} lacks SELECT on {schema}.{MARKER}: {hint}", schema=schema
        )
    row = await conn.fetchrow(f"SELECT version, fingerprint FROM {marker}")
    version = int(row["version"]) if row is not None else 0
    if version < SCHEMA_VERSION:
        raise BackendUnavailableError(
            f"schema {schema!r} is at version {version}; this adapter needs "
            f"{SCHEMA_VERSION}: {hint} to migrate it forward",
            schema=schema,
            version=version,
        )
    if version > SCHEMA_VERSION:
        raise BackendUnavailableError(
            f"schema {schema!r} is at version {version}, newer than this adapter "
            f"({SCHEMA_VERSION}); upgrade agentstores-postgres",
            schema=schema,
            version=version,
        )
    if row["fingerprint"] != fingerprint(version):
        raise BackendUnavailableError(
            f"schema {schema!r} is at version {version} but was installed from other "
            f"definitions of it (fingerprint {row['fingerprint']}, this adapter "
            f"{fingerprint(version)}); reinstall it with this adapter's "
            "`agentstores schema install` into a fresh schema",
            schema=schema,
            version=version,
        )
    stale = await differing(conn, schema)
    if stale:
        raise BackendUnavailableError(
            f"schema {schema!r} holds functions other than this adapter's "
            f"({', '.join(stale)}): {hint} to apply them",
            schema=schema,
            functions=stale,
        )
    missing = await _missing_privileges(conn, schema)
    if missing:
        raise BackendUnavailableError(
            f"role {who!r} lacks {', '.join(missing)}: {hint}", schema=schema, missing=missing
        )
    return version


async def _missing_privileges(conn: Any, schema: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT t.tbl, x.priv, c.oid IS NOT NULL AS exists, "
        "CASE WHEN c.oid IS NULL THEN false ELSE has_table_privilege(c.oid, x.priv) END AS ok "
        "FROM unnest($2::text[]) AS t(tbl) CROSS JOIN unnest($3::text[]) AS x(priv) "
        "LEFT JOIN pg_class c ON c.relname = t.tbl "
        "AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1) "
        "ORDER BY t.tbl, x.priv",
        schema,
        list(DATA_TABLES),
        list(TABLE_PRIVILEGES),
    )
    missing: list[str] = []
    for r in rows:
        if not r["exists"]:
            if f"table {schema}.{r['tbl']} (absent)" not in missing:
                missing.append(f"table {schema}.{r['tbl']} (absent)")
        elif not r["ok"]:
            missing.append(f"{r['priv']} on {schema}.{r['tbl']}")
    funcs = await conn.fetch(
        "SELECT p.proname, bool_and(has_function_privilege(p.oid, 'EXECUTE')) AS ok "
        "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 "
        "GROUP BY p.proname",
        schema,
    )
    allowed = {f["proname"]: f["ok"] for f in funcs}
    for name in FUNCTIONS:
        if name not in allowed:
            missing.append(f"function {schema}.{name} (absent)")
        elif not allowed[name]:
            missing.append(f"EXECUTE on {schema}.{name}")
    return missing


__all__ = ["check"]
