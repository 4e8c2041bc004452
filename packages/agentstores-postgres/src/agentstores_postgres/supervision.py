"""SupervisionStore on PostgreSQL: one row per conversation, CAS in one function call."""

from __future__ import annotations

import asyncio

from agentstores.errors import Refusal, UnknownOutcomeError, refusal_error
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView, Swap, SwapOutcome
from agentstores.stores import SupervisionStore
from agentstores.stores.kit import writer_nonce

from ._base import VISIBLE, PostgresStoreBase
from .database import Conn, WriteOutcome

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
# The same swap publishing its wake-up (push on), in the one statement: for the row
# swapped (none when nothing was), the key's watch rows are probed in the statement
# itself, and only when a listener follows the key does the wake function run (probing
# again and notifying). Always true. Unfollowed, the CAS pays one index probe: no
# function call, no snapshot of its own.
_CAS_EXPECTING_WAKE = _CAS_EXPECTING.replace(
    "RETURNING 1",
    "RETURNING NOT EXISTS (SELECT FROM __S__.watches w WHERE w.tenant = $1 "
    "AND w.session_id = $2 AND w.expires_at > now()) OR __S__.wake($1, $2)",
)
_WHY = """
SELECT owner, erased_at IS NOT NULL AS erased FROM __S__.keys
 WHERE tenant = $1 AND session_id = $2
"""
# Many expected-row swaps (heartbeats) in one statement: each request row is the
# _CAS_EXPECTING UPDATE of its own row. The rows are locked first in key order, so two
# batches over the same keys cannot deadlock; a row not swapped is told apart in the same
# statement (its header, read in the statement's snapshot as _WHY reads it afterwards).
_CAS_MANY = """
WITH req AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[],
                       $6::text[], $7::bigint[])
    WITH ORDINALITY AS r(tenant, session_id, owner, expected, status, message_id, epoch, i)
), locked AS (
  SELECT sv.tenant, sv.session_id FROM __S__.supervision sv
   WHERE (sv.tenant, sv.session_id) IN (SELECT tenant, session_id FROM req)
   ORDER BY sv.tenant, sv.session_id
     FOR UPDATE
), done AS (
  UPDATE __S__.supervision sv
     SET status = r.status, message_id = r.message_id, epoch = r.epoch,
         heartbeat_at = clock_timestamp(), nonce = $8
    FROM req r JOIN locked l ON l.tenant = r.tenant AND l.session_id = r.session_id
   WHERE sv.tenant = r.tenant AND sv.session_id = r.session_id AND sv.epoch = r.expected
     AND sv.owner = r.owner AND sv.epoch <= r.epoch AND sv.fence <= r.epoch
  RETURNING r.i
)
SELECT d.i IS NOT NULL AS swapped,
       k.owner IS NOT NULL AND k.erased_at IS NULL AND k.owner <> r.owner AS not_owned
  FROM req r
  LEFT JOIN done d ON d.i = r.i
  LEFT JOIN __S__.keys k ON k.tenant = r.tenant AND k.session_id = r.session_id
 ORDER BY r.i
"""
_EVIDENCE_MANY = """
SELECT sv.nonce, sv.epoch, sv.owner
  FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS r(tenant, session_id, i)
  LEFT JOIN __S__.supervision sv ON sv.tenant = r.tenant AND sv.session_id = r.session_id
 ORDER BY r.i
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

        swap = _CAS_EXPECTING_WAKE if self.db.config.pushing else _CAS_EXPECTING

        async def run(conn: Conn) -> bool:
            if expected_epoch is None:
                return bool(await conn.fetchval(self.sql(_CAS), *args))
            if await conn.fetchval(self.sql(swap), *args[:8]):
                return True
            why = await conn.fetchrow(self.sql(_WHY), key.tenant, key.session_id)
            if why is not None and not why["erased"] and why["owner"] != principal:
                raise refusal_error(Refusal.NOT_OWNED, key=key)
            return False

        async def reconcile(conn: Conn) -> WriteOutcome[bool]:
            found = await conn.fetchrow(self.sql(_EVIDENCE), key.tenant, key.session_id)
            if found is not None and found["nonce"] == n:
                return WriteOutcome.landed(True)
            # Had it landed, the fence would be >= row.epoch and the row could never
            # return to expected_epoch: still there means it did not land.
            if (
                found is not None
                and expected_epoch is not None
                and row.epoch != expected_epoch
                and found["epoch"] == expected_epoch
            ):
                return WriteOutcome.not_landed()
            return WriteOutcome.unknown()

        return await self.db.write(run, reconcile, what="supervision.compare_and_swap")

    async def _compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        """Swaps expecting a row in one statement (:data:`_CAS_MANY`); creations (no row
        expected, rare in a batch) each through the single path, alongside."""
        batch = [s for s in swaps if s.expected_epoch is not None]
        creates = [s for s in swaps if s.expected_epoch is None]
        swapped, created = await asyncio.gather(
            self._swap_rows(batch), asyncio.gather(*(self._one_swap(s) for s in creates))
        )
        by_swap = dict(zip(batch, swapped, strict=True))
        by_swap.update(zip(creates, created, strict=True))
        return [by_swap[s] for s in swaps]

    async def _swap_rows(self, swaps: list[Swap]) -> list[SwapOutcome]:
        if not swaps:
            return []
        n = writer_nonce()
        tenants = [s.key.tenant for s in swaps]
        sessions = [s.key.session_id for s in swaps]
        args = (
            tenants,
            sessions,
            [s.principal for s in swaps],
            [s.expected_epoch for s in swaps],
            [s.row.status for s in swaps],
            [s.row.message_id for s in swaps],
            [s.row.epoch for s in swaps],
            n,
        )

        async def run(conn: Conn) -> list[SwapOutcome]:
            rows = await conn.fetch(self.sql(_CAS_MANY), *args)
            return [
                SwapOutcome(False, refusal_error(Refusal.NOT_OWNED, key=s.key))
                if r["not_owned"] and not r["swapped"]
                else SwapOutcome(bool(r["swapped"]))
                for s, r in zip(swaps, rows, strict=True)
            ]

        async def reconcile(conn: Conn) -> WriteOutcome[list[SwapOutcome]]:
            # One statement: it committed whole or not at all. A row holding the nonce
            # proves it committed; then a row still at its expected epoch (which a
            # landed swap to another epoch would have fenced away) did not swap.
            found = await conn.fetch(self.sql(_EVIDENCE_MANY), tenants, sessions)
            landed = [f["nonce"] == n for f in found]
            unmoved = [
                f["epoch"] is not None
                and s.row.epoch != s.expected_epoch
                and f["epoch"] == s.expected_epoch
                for s, f in zip(swaps, found, strict=True)
            ]
            if not any(landed):
                return WriteOutcome.not_landed() if all(unmoved) else WriteOutcome.unknown()
            out: list[SwapOutcome] = []
            for s, f, won, still in zip(swaps, found, landed, unmoved, strict=True):
                if won:
                    out.append(SwapOutcome(True))
                elif still and f["owner"] != s.principal:
                    out.append(SwapOutcome(False, refusal_error(Refusal.NOT_OWNED, key=s.key)))
                elif still:
                    out.append(SwapOutcome(False))
                else:
                    out.append(SwapOutcome(False, _unknown(s)))
            return WriteOutcome.landed(out)

        return await self.db.write(run, reconcile, what="supervision.compare_and_swap_many")

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


def _unknown(swap: Swap) -> UnknownOutcomeError:
    return UnknownOutcomeError(
        "supervision.compare_and_swap_many: the connection broke after the batch was sent "
        "and this row carries no trace of whether it swapped",
        key=swap.key,
    )
