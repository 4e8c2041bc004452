"""OAuthStore on PostgreSQL: last-write-wins rows; pending state indexed for lookup."""

from __future__ import annotations

import json
from typing import Any

from agentstores.models import ClientInfo, PendingAuthorization, UserIntegration
from agentstores.stores import OAuthStore

from ._base import PostgresStoreBase
from .database import Conn, WriteOutcome

_COLUMNS = "tenant, user_id, server_name, pending, tokens"
_LIST = f"""
SELECT {_COLUMNS} FROM __S__.oauth_integrations
 WHERE tenant = $1 AND user_id = $2 AND ($3::text[] IS NULL OR server_name = ANY ($3))
 ORDER BY server_name
"""
_GET = f"""
SELECT {_COLUMNS} FROM __S__.oauth_integrations
 WHERE tenant = $1 AND user_id = $2 AND server_name = $3
"""
_BY_STATE = f"""
SELECT {_COLUMNS} FROM __S__.oauth_integrations WHERE pending_state = $1
 ORDER BY tenant, user_id, server_name LIMIT 1
"""
_SAVE = """
INSERT INTO __S__.oauth_integrations AS o
       (tenant, user_id, server_name, pending_state, pending, tokens)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant, user_id, server_name) DO UPDATE
   SET pending_state = excluded.pending_state, pending = excluded.pending,
       tokens = excluded.tokens
"""
_DELETE = """
DELETE FROM __S__.oauth_integrations WHERE tenant = $1 AND user_id = $2 AND server_name = $3
"""
_LIST_CLIENTS = """
SELECT tenant, server_name, client_info FROM __S__.oauth_clients
 WHERE tenant = $1 AND ($2::text[] IS NULL OR server_name = ANY ($2))
 ORDER BY server_name
"""
_GET_CLIENT = """
SELECT tenant, server_name, client_info FROM __S__.oauth_clients
 WHERE tenant = $1 AND server_name = $2
"""
_SAVE_CLIENT = """
INSERT INTO __S__.oauth_clients (tenant, server_name, client_info) VALUES ($1, $2, $3)
ON CONFLICT (tenant, server_name) DO UPDATE SET client_info = excluded.client_info
"""


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


def _integration(r: Any) -> UserIntegration:
    """A row as the record; ``pending`` holds :meth:`PendingAuthorization.to_json`."""
    pending = None
    if r["pending"] is not None:
        pending = PendingAuthorization.from_json(json.loads(r["pending"]))
    tokens = None if r["tokens"] is None else json.loads(r["tokens"])
    return UserIntegration(r["tenant"], r["user_id"], r["server_name"], pending, tokens)


class PostgresOAuthStore(PostgresStoreBase, OAuthStore):
    async def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        async def run(conn: Conn) -> list[UserIntegration]:
            rows = await conn.fetch(self.sql(_LIST), tenant, user, server_names)
            return [_integration(r) for r in rows]

        return await self.db.read(run)

    async def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        async def run(conn: Conn) -> UserIntegration | None:
            r = await conn.fetchrow(self.sql(_GET), tenant, user, server_name)
            return None if r is None else _integration(r)

        return await self.db.read(run)

    async def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        async def run(conn: Conn) -> UserIntegration | None:
            r = await conn.fetchrow(self.sql(_BY_STATE), state)
            return None if r is None else _integration(r)

        return await self.db.read(run)

    async def _save_user_integration(self, record: UserIntegration) -> None:
        pending = None if record.pending is None else _dump(record.pending.to_json())
        tokens = _dump(dict(record.tokens)) if record.tokens is not None else None
        args = (
            record.tenant,
            record.user,
            record.server_name,
            record.pending.state if record.pending is not None else None,
            pending,
            tokens,
        )

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_SAVE), *args)

        async def reconcile(conn: Conn) -> WriteOutcome[None]:
            r = await conn.fetchrow(self.sql(_GET), record.tenant, record.user, record.server_name)
            same = r is not None and r["pending"] == pending and r["tokens"] == tokens
            return WriteOutcome.landed(None) if same else WriteOutcome.unknown()

        await self.db.write(run, reconcile, what="oauth.save_user_integration")

    async def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        async def run(conn: Conn) -> bool:
            status = await conn.execute(self.sql(_DELETE), tenant, user, server_name)
            return bool(status.endswith(" 1"))

        return await self.db.write(run, None, what="oauth.delete_user_integration")

    async def _list_client_info(
        self, tenant: str, server_names: list[str] | None
    ) -> list[ClientInfo]:
        async def run(conn: Conn) -> list[ClientInfo]:
            rows = await conn.fetch(self.sql(_LIST_CLIENTS), tenant, server_names)
            return [
                ClientInfo(r["tenant"], r["server_name"], json.loads(r["client_info"]))
                for r in rows
            ]

        return await self.db.read(run)

    async def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        async def run(conn: Conn) -> ClientInfo | None:
            r = await conn.fetchrow(self.sql(_GET_CLIENT), tenant, server_name)
            if r is None:
                return None
            return ClientInfo(r["tenant"], r["server_name"], json.loads(r["client_info"]))

        return await self.db.read(run)

    async def _save_client_info(self, record: ClientInfo) -> None:
        blob = _dump(dict(record.client_info))
        args = (record.tenant, record.server_name, blob)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_SAVE_CLIENT), *args)

        async def reconcile(conn: Conn) -> WriteOutcome[None]:
            r = await conn.fetchrow(self.sql(_GET_CLIENT), record.tenant, record.server_name)
            same = r is not None and r["client_info"] == blob
            return WriteOutcome.landed(None) if same else WriteOutcome.unknown()

        await self.db.write(run, reconcile, what="oauth.save_client_info")
