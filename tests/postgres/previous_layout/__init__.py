"""The schema as the releases that kept functions in their migrations laid it out.

The seven migration files here are those releases' files, byte for byte (migrations 2 and
4 to 7 held only functions, 3 a column and functions). :func:`install_previous_layout`
installs them the way those releases' ``agentstores schema install`` did, so a test can
take such a schema forward with this version's install.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import asyncpg

from agentstores_postgres.migrations import (
    grant_statements,
    present_tables,
    quote_ident,
    render,
)

FILES = sorted(Path(__file__).parent.glob("000*.sql"))


def previous_fingerprint(version: int) -> str:
    """What a schema that release installed at ``version`` records."""
    digest = hashlib.sha256()
    for number, path in enumerate(FILES, start=1):
        if number <= version:
            digest.update(f"{number}\n{path.read_text(encoding='utf-8')}\n".encode())
    return digest.hexdigest()[:16]


async def install_previous_layout(admin_url: str, schema: str, role: str, version: int) -> None:
    """Migrations 1..``version`` of the previous layout, its marker, and its grants."""
    conn = await asyncpg.connect(admin_url)
    try:
        async with conn.transaction():
            await conn.execute(f"CREATE SCHEMA {quote_ident(schema)}")
            for path in FILES[:version]:
                await conn.execute(render(path.read_text(encoding="utf-8"), schema))
            await conn.execute(
                f"INSERT INTO {quote_ident(schema)}.schema_version (id, version, fingerprint) "
                "VALUES (true, $1, $2)",
                version,
                previous_fingerprint(version),
            )
            tables = await present_tables(conn, schema)
            for statement in grant_statements(schema, role, tables):
                await conn.execute(statement)
    finally:
        await conn.close()
