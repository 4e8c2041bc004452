"""SupervisionStore on PostgreSQL: one row per conversation, CAS in one function call."""

from __future__ import annotations

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView
from agentstores.stores import SupervisionStore
from agentstores.stores.kit import writer_nonce

from ._base import VISIBLE, PostgresStoreBase
from .database import Conn, Verdict

_CAS = "SELECT __S__.sup_cas($1, $2, $3, $4, $5, $6, $7, $8, $9)"
# The hot path (heartbeats and takeovers: a row is expected) is one UPDATE of the
# supervision row alone, the same shape as the raw floor: the row carries copies of the
# header's owner and fence, and its epoch is itself part of the key's fence (see
# sql/0001_tables_and_indexes.sql). A CAS that does not win takes a second round trip
# (_WHY) to tell "not yours" (NotOwnedError) from "lost" (False); winning, the common
# case, takes one.
#
# It takes no header lock, unlike every other write, and stays linearizable: every
# condition is on this row and is re-checked by the UPDATE on the row's latest version.
# Erasing deletes the row; a write raising the fence past the row's epoch updates the
# row's copy (so it conflicts with, and is ordered against, every CAS on the row); an
# owner never changes while a row exists. The functions insert supervision rows with
# ON CONFLICT and delete them by the row's own conditions, so none acts on a stale row.
_CAS_EXPECTING = """
UPDATE __S__.supervision
   SET status = $5, message_id = $6, epoch = $7, heartbeat_at = clock_timestamp(), nonce = $8
 WHERE tenant = $1 AND session_id = $2 AND epoch = $4 AND owner = $3
   AND epoch <= $7 AND fence <= $7
RETURNING 1
"""
_WHY = """
SELECT owner, erased_at IS NOT NULL AS erased FROM __S__.keys
 WHERE tenant = $1 AND session_id = $2
"""
_READ = f"""
SELECT statement_timestamp() AS now, greatest(k.fence, sv.epoch) AS fence, k.owner,
       sv.status, sv.message_id, sv.epoch, sv.heartbeat_at
  FROM (SELECT 1) AS one
  LEFT JOIN __S__.keys k ON k.tenant = $1 AND k.session_id = $2 AND {VISIBLE}
  LEFT JOIN __S__.supervision sv ON sv.tenant = k.tenant AND sv.session_id = k.session_id
"""
_DELETE = "SELECT __S__.sup_delete($1, $2, $3, $4, $5, $6)"
_EVIDENCE = "SELECT nonce, epoch FROM __S__.supervision WHERE tenant = $1 AND session_id = $2"


class PostgresSupervisionStore(PostgresStoreBase, SupervisionStore):
    async def _compare_and_swap(
        self,
        key: ConversationKey,
        principal: str,
        expected_epoch: int | None,
        row: SupervisionRow,
    ) -> bool:
        n = writer_nonce()
        args = (
            key.tenant,
            key.session_id,
            principal,
            expected_epoch,
            row.status,
            row.message_id,
            row.epoch,
            n,
            self.ttl,
        )

        async def run(conn: Conn) -> bool:
            if expected_epoch is None:
                return bool(await conn.fetchval(self.sql(_CAS), *args))
            if await conn.fetchval(self.sql(_CAS_EXPECTING), *args[:8]):
                return True
            why = await conn.fetchrow(self.sql(_WHY), key.tenant, key.session_id)
            if why is not None and not why["erased"] and why["owner"] != principal:
                raise refusal_error(Refusal.NOT_OWNED, key=key)
            return False

        async def reconcile(conn: Conn) -> Verdict[bool]:
            found = await conn.fetchrow(self.sql(_EVIDENCE), key.tenant, key.session_id)
            if found is not None and found["nonce"] == n:
                return Verdict.landed(True)
            # Had it landed, the fence would be >= row.epoch and the row could never
            # return to expected_epoch: still there means it did not land.
            if (
                found is not None
                and expected_epoch is not None
                and row.epoch != expected_epoch
                and found["epoch"] == expected_epoch
            ):
                return Verdict.not_landed()
            return Verdict.unknown()

        return await self.db.write(run, reconcile, what="supervision.compare_and_swap")

    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        async def run(conn: Conn) -> SupervisionView:
            r = await conn.fetchrow(self.sql(_READ), key.tenant, key.session_id, principal)
            if r["owner"] is None:
                return SupervisionView(None, r["now"], 0)
            sup = None
            if r["status"] is not None:
                sup = SupervisionRow(
                    status=r["status"],
                    message_id=r["message_id"],
                    epoch=r["epoch"],
                    heartbeat_at=r["heartbeat_at"],
                    owner=r["owner"],
                )
            return SupervisionView(sup, r["now"], r["fence"])

        return await self.db.read(run)

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        args = (key.tenant, key.session_id, principal, message_id, epoch, self.ttl)

        async def run(conn: Conn) -> bool:
            return bool(await conn.fetchval(self.sql(_DELETE), *args))

        return await self.write(run, None, what="supervision.delete", key=key)
