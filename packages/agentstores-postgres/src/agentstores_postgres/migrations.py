"""The versioned migrations, the grants they imply, and the check the adapter runs at open.

Each migration is one file of package data, ``sql/NNNN_what_it_does.sql``, applied in
version order. ``__S__`` in a file stands for the quoted schema name. The
bytes of every file are part of the schema's fingerprint (:func:`fingerprint`), so a
released migration is never edited: a change is a new file.

Why server-side functions (migration 2): a write must lock the key's header row and then
read other tables. In one SQL statement every read uses the snapshot taken when the
statement began, so after waiting for the lock it could decide on stale rows. Inside a
PL/pgSQL function (READ COMMITTED, VOLATILE) each statement takes a fresh snapshot, so
everything read after ``SELECT ... FOR UPDATE`` on the header is current. Each store
call is still one statement and one round trip.

The functions refuse through SQLSTATEs of class ``AS`` (agentstores), which
:mod:`agentstores_postgres.errors` maps onto the typed errors: ``ASNOW`` not owned,
``ASERA`` erased, ``ASFEN`` fenced (DETAIL: the fence), ``ASNFD`` not found, ``ASSTA``
stale tail (DETAIL: ``=`` and the tail, empty for an empty transcript), ``ASCON``
conflict, ``ASEXP`` expired, ``ASCLM`` already claimed (DETAIL: the status). Raising rolls
the whole call back, including a header it had just claimed.

At runtime the adapter runs no DDL: :func:`check` refuses to start when the version
marker is missing, older or newer than :data:`SCHEMA_VERSION`, or when a privilege is
missing, naming what is wrong.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from agentstores.errors import BackendUnavailableError, UsageError

MARKER = "schema_version"
"""The one-row table recording the installed version and its fingerprint."""
DATA_TABLES = (
    "keys",
    "supervision",
    "recording",
    "agent_state",
    "conversations",
    "owner_counts",
    "messages",
    "pause_tokens",
    "oauth_integrations",
    "oauth_clients",
)
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_FILE_NAME = re.compile(r"^(\d{4})_([\w-]+)\.sql$")


def check_identifier(name: str, what: str) -> str:
    """Schema and role names are plain identifiers; anything else is refused up front."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise UsageError(
            f"{what} must be a plain identifier (letters, digits, _; at most 63), got {name!r}"
        )
    return name


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


# --- the migrations --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: its version, what it does (from its name), its SQL."""

    version: int
    description: str
    sql: str


def _load() -> tuple[Migration, ...]:
    """Every ``sql/NNNN_*.sql`` file shipped in this package, numbered 1, 2, ..."""
    found: list[Migration] = []
    for entry in resources.files("agentstores_postgres").joinpath("sql").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is None:
            continue
        number, words = match.groups()
        text = entry.read_text(encoding="utf-8")
        found.append(Migration(int(number), words.replace("_", " "), text))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration files are not numbered 1..n: {[m.version for m in found]}")
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = _load()

SCHEMA_VERSION = MIGRATIONS[-1].version
"""The version this adapter needs: the newest migration."""

FUNCTIONS: tuple[str, ...] = tuple(
    sorted({m for mig in MIGRATIONS for m in re.findall(r"CREATE FUNCTION __S__\.(\w+)", mig.sql)})
)
"""Every function the migrations define; the runtime role needs EXECUTE on each."""


def fingerprint(version: int) -> str:
    """SHA-256 of the migrations up to ``version``: a schema installed from other
    definitions of the same version number is refused rather than half-trusted."""
    digest = hashlib.sha256()
    for migration in MIGRATIONS:
        if migration.version <= version:
            digest.update(f"{migration.version}\n{migration.sql}\n".encode())
    return digest.hexdigest()[:16]


def render(sql: str, schema: str) -> str:
    """``sql`` with ``__S__`` replaced by the quoted ``schema``."""
    return sql.replace("__S__", quote_ident(check_identifier(schema, "schema")))


async def installed_version(conn: Any, schema: str) -> int:
    """The version recorded in ``schema``'s marker; 0 when there is none."""
    exists = await conn.fetchval(
        "SELECT to_regclass(format('%I.%I', $1::text, $2::text)) IS NOT NULL", schema, MARKER
    )
    if not exists:
        return 0
    version = await conn.fetchval(f"SELECT version FROM {quote_ident(schema)}.{MARKER}")
    return int(version or 0)


async def migrate(conn: Any, schema: str, target: int) -> tuple[int, int, list[str]]:
    """Apply, in the caller's transaction, every migration newer than ``schema``'s
    version up to ``target``, and record the new version.

    Returns ``(before, after, applied)``, ``applied`` naming each migration run. Refuses
    a schema newer than this adapter, and one whose recorded fingerprint is not this
    adapter's for its version (installed from other definitions).
    """
    before = await installed_version(conn, schema)
    if before > SCHEMA_VERSION:
        raise UsageError(
            f"schema {schema!r} is at version {before}, newer than this adapter's "
            f"{SCHEMA_VERSION}; upgrade agentstores-postgres instead"
        )
    marker = f"{quote_ident(schema)}.{MARKER}"
    if before:
        recorded = await conn.fetchval(f"SELECT fingerprint FROM {marker}")
        if recorded != fingerprint(before):
            raise UsageError(
                f"schema {schema!r} records version {before} with fingerprint "
                f"{recorded}, but this adapter's version {before} is "
                f"{fingerprint(before)}: it was installed from other definitions; "
                "install into a fresh schema and move the data"
            )
    applied: list[str] = []
    for migration in MIGRATIONS:
        if before < migration.version <= target:
            await conn.execute(render(migration.sql, schema))
            applied.append(f"{migration.version} ({migration.description})")
    after = max(before, target)
    await conn.execute(
        f"INSERT INTO {marker} (id, version, fingerprint) VALUES (true, $1, $2) "
        "ON CONFLICT (id) DO UPDATE SET version = excluded.version, "
        "fingerprint = excluded.fingerprint, migrated_at = now() "
        f"WHERE {marker}.version < excluded.version",
        after,
        fingerprint(after),
    )
    return before, after, applied


def grant_statements(schema: str, role: str) -> list[str]:
    """Exactly what the runtime role needs, and nothing on the functions for PUBLIC."""
    s, r = quote_ident(schema), quote_ident(role)
    tables = ", ".join(f"{s}.{quote_ident(t)}" for t in DATA_TABLES)
    return [
        f"GRANT USAGE ON SCHEMA {s} TO {r}",
        f"GRANT SELECT ON {s}.{MARKER} TO {r}",
        f"GRANT {', '.join(TABLE_PRIVILEGES)} ON {tables} TO {r}",
        f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {s} FROM PUBLIC",
        f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {s} TO {r}",
    ]


# --- the runtime check (no DDL) --------------------------------------------------------


async def check(conn: Any, schema: str) -> int:
    """Refuse to run unless ``schema`` is installed at :data:`SCHEMA_VERSION` and the
    connected role holds every privilege the adapter uses. Returns the version.

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
