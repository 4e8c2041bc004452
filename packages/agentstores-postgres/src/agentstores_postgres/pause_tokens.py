"""PauseTokenStore on PostgreSQL: one row per (conversation, token), claimed once."""

from __future__ import annotations

from datetime import datetime

from agentstores.keys import ConversationKey
from agentstores.stores import PauseTokenStore
from agentstores.stores.kit import writer_nonce

from ._base import PostgresStoreBase
from .database import Conn, WriteOutcome

_PUT = "SELECT __S__.token_put($1, $2, $3, $4, $5, $6, $7, $8, $9)"
_CLAIM = "SELECT __S__.token_claim($1, $2, $3, $4, $5, $6)"
_ABANDON = "SELECT __S__.token_abandon($1, $2, $3, $4, $5, $6)"
_EVIDENCE = """
SELECT status, nonce, payload FROM __S__.pause_tokens
 WHERE tenant = $1 AND session_id = $2 AND token_id = $3
"""


class PostgresPauseTokenStore(PostgresStoreBase, PauseTokenStore):
    async def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        n = writer_nonce()
        args = (
            key.tenant,
            key.session_id,
            token_id,
            principal,
            payload_json,
            expires_at,
            epoch,
            n,
            self.ttl,
        )

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_PUT), *args)

        async def reconcile(conn: Conn) -> WriteOutcome[None]:
            r = await conn.fetchrow(self.sql(_EVIDENCE), key.tenant, key.session_id, token_id)
            return (
                WriteOutcome.landed(None)
                if r is not None and r["nonce"] == n
                else WriteOutcome.unknown()
            )

        await self.write(run, reconcile, what="pause_tokens.put", key=key, epoch=epoch)

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        n = writer_nonce()
        args = (key.tenant, key.session_id, token_id, principal, n, self.ttl)

        async def run(conn: Conn) -> bytes:
            return bytes(await conn.fetchval(self.sql(_CLAIM), *args))

        async def reconcile(conn: Conn) -> WriteOutcome[bytes]:
            r = await conn.fetchrow(self.sql(_EVIDENCE), key.tenant, key.session_id, token_id)
            if r is None:
                return WriteOutcome.unknown()
            if r["status"] == "claimed" and r["nonce"] == n:
                return WriteOutcome.landed(bytes(r["payload"]))
            if r["status"] == "pending":
                # A claim is never undone: still pending means this one did not land.
                return WriteOutcome.not_landed()
            return WriteOutcome.unknown()

        return await self.write(run, reconcile, what="pause_tokens.claim", key=key)

    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        n = writer_nonce()
        args = (key.tenant, key.session_id, token_id, principal, n, self.ttl)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_ABANDON), *args)

        async def reconcile(conn: Conn) -> WriteOutcome[None]:
            r = await conn.fetchrow(self.sql(_EVIDENCE), key.tenant, key.session_id, token_id)
            if r is not None and r["status"] == "abandoned" and r["nonce"] == n:
                return WriteOutcome.landed(None)
            return WriteOutcome.unknown()

        await self.write(run, reconcile, what="pause_tokens.abandon", key=key)
