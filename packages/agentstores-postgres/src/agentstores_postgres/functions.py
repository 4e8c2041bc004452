"""The server-side functions: each in one file, ``sql/functions/<name>.sql``, holding its
current definition, so what a call does now is one file to read.

Tables change through versioned migrations (:mod:`agentstores_postgres.migrations`);
functions do not. ``agentstores schema install`` re-applies every function whose file
changed since it was installed (:func:`install_functions`) and leaves the others alone.
Each installed function records its file's fingerprint in its comment (``COMMENT ON
FUNCTION``), so the record goes wherever the function goes and cannot outlive it; the
adapter checks those fingerprints at open (:func:`differing`) and refuses a schema whose
functions are not this version's, as it refuses one whose migrations are not.

Why server-side functions: a write must lock the key's header row and then read other
tables. In one SQL statement every read uses the snapshot taken when the statement
began, so after waiting for the lock it could decide on stale rows. Inside a PL/pgSQL
function (READ COMMITTED, VOLATILE) each statement takes a fresh snapshot, so everything
read after ``SELECT ... FOR UPDATE`` on the header is current. Each store call is still
one statement and one round trip.

The functions refuse through SQLSTATEs of class ``AS`` (agentstores), which
:mod:`agentstores_postgres.errors` maps onto the typed errors: ``ASNOW`` not owned,
``ASERA`` erased, ``ASFEN`` fenced (DETAIL: the fence), ``ASNFD`` not found, ``ASSTA``
stale tail (DETAIL: ``=`` and the tail, empty for an empty transcript), ``ASCON``
conflict, ``ASEXP`` expired, ``ASCLM`` already claimed (DETAIL: the status), ``ASBIG``
metadata over its limit. Raising rolls the whole call back, including a header it had
just claimed.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .migrations import quote_ident, render

MARK_PREFIX = "agentstores: "
"""How the comment this adapter puts on each of its functions begins."""
_DEFINITION = re.compile(r"^CREATE OR REPLACE FUNCTION __S__\.(\w+)\(", re.MULTILINE)
_SIGNATURE_CHANGED = "42P13"
"""invalid_function_definition: ``CREATE OR REPLACE`` cannot change a function's result
type or parameter names; the function is dropped and created instead."""


@dataclass(frozen=True, slots=True)
class FunctionDefinition:
    """One function file: the function's name and its ``CREATE OR REPLACE`` statement."""

    name: str
    sql: str

    @property
    def mark(self) -> str:
        """The comment an installed function carries: its file and the file's fingerprint."""
        digest = hashlib.sha256(self.sql.encode()).hexdigest()[:16]
        return f"{MARK_PREFIX}sql/functions/{self.name}.sql {digest}"


def _load() -> tuple[FunctionDefinition, ...]:
    """Every ``sql/functions/*.sql`` file shipped in this package, by name."""
    found: list[FunctionDefinition] = []
    folder = resources.files("agentstores_postgres").joinpath("sql", "functions")
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text(encoding="utf-8")
        names = _DEFINITION.findall(text)
        if names != [entry.name[: -len(".sql")]]:
            raise RuntimeError(f"sql/functions/{entry.name} must define that one function")
        found.append(FunctionDefinition(names[0], text))
    return tuple(sorted(found, key=lambda d: d.name))


DEFINITIONS: tuple[FunctionDefinition, ...] = _load()

FUNCTIONS: tuple[str, ...] = tuple(d.name for d in DEFINITIONS)
"""Every function's name; the runtime role needs EXECUTE on each."""

_INSTALLED = """
SELECT p.proname AS name, p.oid::regprocedure::text AS signature,
       obj_description(p.oid, 'pg_proc') AS mark
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = $1
"""
_EXECUTORS = """
SELECT DISTINCT a.grantee::regrole::text AS role
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 CROSS JOIN LATERAL aclexplode(p.proacl) a
 WHERE n.nspname = $1 AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
   AND a.grantee <> p.proowner
 ORDER BY 1
"""


async def _installed(conn: Any, schema: str) -> dict[str, list[tuple[str, str | None]]]:
    """Each function name in ``schema``: its overloads' ``(signature, comment)``."""
    found: dict[str, list[tuple[str, str | None]]] = {}
    for r in await conn.fetch(_INSTALLED, schema):
        found.setdefault(r["name"], []).append((r["signature"], r["mark"]))
    return found


async def differing(conn: Any, schema: str) -> list[str]:
    """Each function of this version that ``schema`` lacks (``name (absent)``) or holds
    from other definitions (``name (differs)``); empty when all are this version's."""
    installed = await _installed(conn, schema)
    problems: list[str] = []
    for d in DEFINITIONS:
        marks = [mark for _, mark in installed.get(d.name, [])]
        if not marks:
            problems.append(f"{d.name} (absent)")
        elif d.mark not in marks:
            problems.append(f"{d.name} (differs)")
    return problems


async def install_functions(conn: Any, schema: str) -> list[str]:
    """Apply, in the caller's transaction, every function whose installed fingerprint is
    not its file's; returns their names. An unchanged function is not touched.

    ``CREATE OR REPLACE`` keeps a function's identity and grants; a changed signature
    (or a leftover overload) is dropped and created, and whoever held EXECUTE on any of
    the schema's functions (the runtime roles) gets it on the new one. PUBLIC gets none.
    A function an earlier version installed and this one no longer defines is dropped.
    """
    installed = await _installed(conn, schema)
    executors = [r["role"] for r in await conn.fetch(_EXECUTORS, schema)]
    applied: list[str] = []
    for d in DEFINITIONS:
        found = installed.get(d.name, [])
        if [mark for _, mark in found] == [d.mark]:
            continue
        await _apply(conn, schema, d, [signature for signature, _ in found])
        target = f"{quote_ident(schema)}.{quote_ident(d.name)}"
        await conn.execute(f"REVOKE ALL ON FUNCTION {target} FROM PUBLIC")
        for role in executors:
            await conn.execute(f"GRANT EXECUTE ON FUNCTION {target} TO {role}")
        await conn.execute(f"COMMENT ON FUNCTION {target} IS {_literal(d.mark)}")
        applied.append(d.name)
    for name, overloads in installed.items():
        if name in FUNCTIONS:
            continue
        for signature, mark in overloads:
            if mark is not None and mark.startswith(MARK_PREFIX):
                await conn.execute(f"DROP FUNCTION {signature}")
    return applied


async def _apply(conn: Any, schema: str, d: FunctionDefinition, signatures: list[str]) -> None:
    """Leave exactly one function named ``d.name``: ``d``'s definition."""
    sql = render(d.sql, schema)
    if len(signatures) <= 1:
        try:
            async with conn.transaction():  # a savepoint: a refusal undoes only this
                await conn.execute(sql)
        except Exception as exc:
            if getattr(exc, "sqlstate", None) != _SIGNATURE_CHANGED:
                raise
        else:
            if len(await _overloads(conn, schema, d.name)) == 1:
                return
    for signature in await _overloads(conn, schema, d.name):
        await conn.execute(f"DROP FUNCTION {signature}")
    await conn.execute(sql)


async def _overloads(conn: Any, schema: str, name: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT p.oid::regprocedure::text AS signature FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2",
        schema,
        name,
    )
    return [r["signature"] for r in rows]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


__all__ = ["DEFINITIONS", "FUNCTIONS", "FunctionDefinition", "differing", "install_functions"]
