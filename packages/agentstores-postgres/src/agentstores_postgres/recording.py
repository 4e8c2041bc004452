"""RecordingStore on PostgreSQL: one overwritten row per conversation."""

from __future__ import annotations

import json

from agentstores.keys import ConversationKey
from agentstores.models import RecordedEvent
from agentstores.stores import RecordingStore
from agentstores.stores.kit import writer_nonce

from ._base import VISIBLE, PostgresStoreBase
from .database import Conn, WriteOutcome

_PUT = "SELECT __S__.rec_put($1, $2, $3, $4, $5, $6, $7, $8, $9)"
_READ = f"""
SELECT rc.idx, rc.message, rc.message_id, rc.epoch
  FROM __S__.keys k
  JOIN __S__.recording rc ON rc.tenant = k.tenant AND rc.session_id = k.session_id
 WHERE k.tenant = $1 AND k.session_id = $2 AND {VISIBLE}
"""
_DELETE = "SELECT __S__.rec_delete($1, $2, $3, $4, $5, $6)"
_EVIDENCE = "SELECT nonce FROM __S__.recording WHERE tenant = $1 AND session_id = $2"


class PostgresRecordingStore(PostgresStoreBase, RecordingStore):
    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        n = writer_nonce()
        args = (
            key.tenant,
            key.session_id,
            principal,
            event.index,
            message_json,
            event.message_id,
            event.epoch,
            n,
            self.ttl,
        )

        async def run(conn: Conn) -> bool:
            return bool(await conn.fetchval(self.sql(_PUT), *args))

        async def reconcile(conn: Conn) -> WriteOutcome[bool]:
            found = await conn.fetchval(self.sql(_EVIDENCE), key.tenant, key.session_id)
            return WriteOutcome.landed(True) if found == n else WriteOutcome.unknown()

        return await self.write(run, reconcile, what="recording.put", key=key, epoch=event.epoch)

    async def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        async def run(conn: Conn) -> RecordedEvent | None:
            r = await conn.fetchrow(self.sql(_READ), key.tenant, key.session_id, principal)
            if r is None:
                return None
            return RecordedEvent(r["idx"], json.loads(r["message"]), r["message_id"], r["epoch"])

        return await self.db.read(run)

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        args = (key.tenant, key.session_id, principal, message_id, epoch, self.ttl)

        async def run(conn: Conn) -> bool:
            return bool(await conn.fetchval(self.sql(_DELETE), *args))

        return await self.write(run, None, what="recording.delete", key=key, epoch=epoch)
