"""The raw floor: the adapter's CAS at its core, done with a bare asyncpg pool.

One conditional ``UPDATE ... WHERE epoch = $op`` stamping the database clock, on the
adapter's own ``supervision`` table (same table, same indexes, same durability), with
scratch rows under a random tenant that nothing else uses. It needs the schema installed
(the runtime role can write that table but may not create one).
"""

from __future__ import annotations

import uuid
from typing import Any

from agentstores.errors import BackendUnavailableError
from agentstores_postgres.database import keep_session
from agentstores_postgres.migrations import check_identifier, quote_ident
from agentstores_postgres.urls import parse_url

from ..bench.floor import RawFloor


class PostgresFloor(RawFloor):
    name = "asyncpg UPDATE supervision SET epoch = $op + 1 WHERE key AND epoch = $op"

    def __init__(self) -> None:
        self.pool: Any = None
        self.tenant = f"__floor_{uuid.uuid4().hex}"
        self.table = ""
        self.statement = ""

    async def setup(self, url: str, clients: int) -> None:
        import asyncpg

        config = parse_url(url)
        schema = quote_ident(check_identifier(config.schema, "schema"))
        self.table = f"{schema}.supervision"
        self.statement = (
            f"UPDATE {self.table} SET epoch = $3, heartbeat_at = clock_timestamp() "
            "WHERE tenant = $1 AND session_id = $2 AND epoch = $4 RETURNING 1"
        )
        # No reset query on release: one round trip per CAS, as in the adapter.
        options: dict[str, Any] = {"min_size": clients, "max_size": clients, "reset": keep_session}
        if config.pgbouncer:
            options["statement_cache_size"] = 0
        self.pool = await asyncpg.create_pool(config.dsn, **options)
        try:
            await self.pool.executemany(
                f"INSERT INTO {self.table} (tenant, session_id, owner, fence, status, "
                "message_id, epoch, heartbeat_at, nonce) VALUES ($1, $2, '', 0, 'running', "
                "'floor', 0, clock_timestamp(), gen_random_uuid())",
                [(self.tenant, str(c)) for c in range(clients)],
            )
        except asyncpg.UndefinedTableError as exc:
            raise BackendUnavailableError(
                f"{self.table} does not exist: install the schema first "
                "(agentstores schema install)"
            ) from exc

    async def cas(self, client: int, op: int) -> bool:
        done = await self.pool.fetchval(self.statement, self.tenant, str(client), op + 1, op)
        return done is not None

    async def close(self) -> None:
        if self.pool is None:
            return
        try:
            await self.pool.execute(f"DELETE FROM {self.table} WHERE tenant = $1", self.tenant)
        finally:
            await self.pool.close()
            self.pool = None
