"""Deliberately broken variants of the MongoDB backend, each breaking one promise.

``UpsertCasStores`` writes the supervision row with ``update_one({"_id": key}, ...,
upsert=True)``: the expectation is checked on a read, and the write, filtered on the key
alone, always matches (or inserts), so it never loses. Two callers holding the same
expectation both see it on their reads and both win: the lost update that a CAS
filtered on the expected ``rev`` and judged by ``matched_count`` prevents.
"""

from __future__ import annotations

from typing import Any

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow
from agentstores.stores import kit
from agentstores_mongo.header import read_header, row_value
from agentstores_mongo.stores import MongoStores
from agentstores_mongo.supervision import MongoSupervisionStore


class UpsertingSupervisionStore(MongoSupervisionStore):
    """BROKEN: checks the expectation on a read, then upserts on the key alone."""

    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        ctx = self.ctx
        h = await read_header(ctx, key)
        refusal = h.judge(principal, row.epoch)
        if refusal is Refusal.NOT_OWNED:
            raise refusal_error(refusal, key=key)
        if refusal is not None:
            return False
        current = h.row
        if expected_epoch is None:
            if current is not None:
                return False
        elif current is None or current["e"] != expected_epoch:
            return False
        fields, _ = h.claim(principal)
        fields["f"] = kit.raised_fence(h.fence, row.epoch)
        fields["sup"] = row_value(row.status, row.message_id, row.epoch)
        fields["rev"] = h.rev + 1
        fields.setdefault("t", key.tenant)
        fields.setdefault("s", key.session_id)
        await ctx.keys.update_one(
            {"_id": h.id}, {"$set": fields, "$currentDate": {"hb": True}}, upsert=True
        )
        return True


class UpsertCasStores(MongoStores):
    """BROKEN: the MongoDB backend with a supervision CAS that upserts."""

    def __init__(self, url: Any = "mongodb://127.0.0.1:27017", **options: Any) -> None:
        super().__init__(url, **options)
        self.supervision = UpsertingSupervisionStore(self.ctx)


MUTANTS = {"upsert_cas": "tests.catalogue.mongo_mutants:UpsertCasStores"}
"""Broken promise -> factory spec (``module:callable`` taking a URL)."""
