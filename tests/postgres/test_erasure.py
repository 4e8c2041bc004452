"""Erasure leaves nothing of an owner behind: once their last conversation is erased (by
them or by the sweeper), no ``owner_counts`` row names them."""

from __future__ import annotations

import uuid

import asyncpg

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.stores import OverCap
from agentstores_postgres.schema import install
from agentstores_postgres.stores import PostgresStores
from tests.servers.postgres import Installation

from .conftest import PgServer
from .previous_layout import install_previous_layout


async def _owner_counts(admin_url: str, schema: str, tenant: str) -> dict[str, int]:
    conn = await asyncpg.connect(admin_url)
    try:
        rows = await conn.fetch(
            f'SELECT owner, conversations FROM "{schema}".owner_counts WHERE tenant = $1', tenant
        )
    finally:
        await conn.close()
    return {r["owner"]: r["conversations"] for r in rows}


async def test_the_owners_last_erasure_removes_their_count(pg: PgServer) -> None:
    tenant = f"t-{uuid.uuid4().hex}"
    schema = pg.installation.schema
    a, b, c = (ConversationKey(tenant, s) for s in ("a", "b", "c"))
    async with PostgresStores(pg.url) as stores:
        conv = stores.conversations
        for key, owner in ((a, "u"), (b, "u"), (c, "v")):
            await conv.append_messages(key, owner, [Message.user("hi")])
        assert await _owner_counts(pg.admin_url, schema, tenant) == {"u": 2, "v": 1}
        assert await conv.delete(a, "u")
        assert await _owner_counts(pg.admin_url, schema, tenant) == {"u": 1, "v": 1}
        assert await conv.delete(b, "u")
        assert await _owner_counts(pg.admin_url, schema, tenant) == {"v": 1}
        assert await conv.erase_if(c, OverCap(0))
        assert await _owner_counts(pg.admin_url, schema, tenant) == {}
        await conv.append_messages(ConversationKey(tenant, "d"), "u", [Message.user("new")])
        assert await _owner_counts(pg.admin_url, schema, tenant) == {"u": 1}


async def test_upgrading_removes_the_counts_earlier_erasures_left_at_zero(pg: PgServer) -> None:
    async with Installation(pg.admin_url, install=False) as bare:
        await install_previous_layout(pg.admin_url, bare.schema, bare.role, 7)
        conn = await asyncpg.connect(pg.admin_url)
        try:
            await conn.execute(
                f'INSERT INTO "{bare.schema}".owner_counts (tenant, owner, conversations) '
                "VALUES ('t', 'gone', 0), ('t', 'kept', 2)"
            )
        finally:
            await conn.close()
        await install(pg.admin_url, schema=bare.schema, runtime_role=bare.role)
        assert await _owner_counts(pg.admin_url, bare.schema, "t") == {"kept": 2}
