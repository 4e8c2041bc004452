"""The versioned migrations of the tables, and the grants they imply.

Each migration is one file of package data, ``sql/NNNN_what_it_does.sql``, applied in
version order: tables, indexes, types and data changes, never a function (functions are
in :mod:`agentstores_postgres.functions`, re-applied by install whenever they change).
``__S__`` in a file stands for the quoted schema name. The bytes of every file are part
of the schema's fingerprint (:func:`fingerprint`), so a released migration is never
edited: a change is a new file. A version whose release changed only functions has no
file (2 and 4 to 7: those releases kept functions in their migrations).

Schemas installed by those releases record the fingerprints of that layout
(:data:`PREVIOUS_LAYOUT`): their tables are those of the same version here, so install
takes them forward like any other schema and replaces their functions.

The check the adapter runs at open is in :mod:`agentstores_postgres.schema_check`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from agentstores.errors import UsageError

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
    "watches",
)
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_FILE_NAME = re.compile(r"^(\d{4})_([\w-]+)\.sql$")


def check_identifier(name: str, what: str) -> str:
    """Schema and role names are plain identifiers; anything else is refused up front."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
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
    """Every ``sql/NNNN_*.sql`` file shipped in this package, by version (1 first, no
    version twice; a version with no file changed no table)."""
    found: list[Migration] = []
    for entry in resources.files("agentstores_postgres").joinpath("sql").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is None:
            continue
        number, words = match.groups()
        text = entry.read_text(encoding="utf-8")
        found.append(Migration(int(number), words.replace("_", " "), text))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if not versions or versions[0] != 1 or len(set(versions)) != len(versions):
        raise RuntimeError(f"migration files must start at 1, each version once: {versions}")
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = _load()

SCHEMA_VERSION = MIGRATIONS[-1].version
"""The version this adapter needs: the newest migration."""

PREVIOUS_LAYOUT: dict[int, str] = {
    1: "2de620ef9c3f24c5",
    2: "843b57d6c86d5539",
    3: "809da028dc80d851",
    4: "a0e2ad1c1968a33a",
    5: "8de013772043e249",
    6: "bd530f9ddf33edf6",
    7: "0f4bf708b904f441",
}
"""The fingerprint a schema installed by a release that kept functions in its migrations
records for each version; its tables are those of that version here."""


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
    version up to ``target``, and record the new version and its fingerprint.

    Returns ``(before, after, applied)``, ``applied`` naming each migration run. Refuses
    a schema newer than this adapter, and one whose recorded fingerprint is neither this
    adapter's for its version nor the previous layout's (installed from other
    definitions).
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
        if recorded not in (fingerprint(before), PREVIOUS_LAYOUT.get(before)):
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
        f"WHERE ({marker}.version, {marker}.fingerprint) "
        "IS DISTINCT FROM (excluded.version, excluded.fingerprint)",
        after,
        fingerprint(after),
    )
    return before, after, applied


async def present_tables(conn: Any, schema: str) -> list[str]:
    """The data tables ``schema`` holds now (an older version lacks the newer ones)."""
    rows = await conn.fetch(
        "SELECT t FROM unnest($2::text[]) AS t "
        "WHERE to_regclass(format('%I.%I', $1::text, t)) IS NOT NULL",
        schema,
        list(DATA_TABLES),
    )
    return [r["t"] for r in rows]


def grant_statements(schema: str, role: str, tables: Sequence[str] = DATA_TABLES) -> list[str]:
    """Exactly what the runtime role needs, and nothing on the functions for PUBLIC
    (``tables``: the data tables the schema holds, by default all of this version's)."""
    s, r = quote_ident(schema), quote_ident(role)
    named = ", ".join(f"{s}.{quote_ident(t)}" for t in tables)
    return [
        f"GRANT USAGE ON SCHEMA {s} TO {r}",
        f"GRANT SELECT ON {s}.{MARKER} TO {r}",
        f"GRANT {', '.join(TABLE_PRIVILEGES)} ON {named} TO {r}",
        f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {s} FROM PUBLIC",
        f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {s} TO {r}",
    ]
