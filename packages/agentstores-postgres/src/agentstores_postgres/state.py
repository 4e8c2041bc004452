"""AgentStateStore on PostgreSQL: one bytea blob per conversation (TOASTed when large)."""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.stores import AgentStateStore
from agentstores.stores.kit import writer_nonce

from ._base import VISIBLE, PostgresStoreBase
from .database import Conn, WriteOutcome

_LOAD = f"""
SELECT st.blob
  FROM __S__.keys k
  JOIN __S__.agent_state st ON st.tenant = k.tenant AND st.session_id = k.session_id
 WHERE k.tenant = $1 AND k.session_id = $2 AND {VISIBLE}
"""
_SAVE = "SELECT __S__.state_save($1, $2, $3, $4, $5, $6, $7)"
_DELETE = "SELECT __S__.state_delete($1, $2, $3, $4, $5)"
_EVIDENCE = "SELECT nonce FROM __S__.agent_state WHERE tenant = $1 AND session_id = $2"


class PostgresAgentStateStore(PostgresStoreBase, AgentStateStore):
    async def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        async def run(conn: Conn) -> bytes | None:
            blob = await conn.fetchval(self.sql(_LOAD), key.tenant, key.session_id, principal)
            return bytes(blob) if blob is not None else None

        return await self.db.read(run)

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        n = writer_nonce()
        args = (key.tenant, key.session_id, principal, blob, epoch, n, self.ttl)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_SAVE), *args)

        async def reconcile(conn: Conn) -> WriteOutcome[None]:
            found = await conn.fetchval(self.sql(_EVIDENCE), key.tenant, key.session_id)
            return WriteOutcome.landed(None) if found == n else WriteOutcome.unknown()

        await self.write(run, reconcile, what="state.save", key=key, epoch=epoch)

    async def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        args = (key.tenant, key.session_id, principal, epoch, self.ttl)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_DELETE), *args)

        await self.write(run, None, what="state.delete", key=key, epoch=epoch)
