"""The raw floor for ``agentstores bench``: the adapter's CAS at its core, one
``update_one({"_id": key, "rev": n}, {"$set": {"rev": n + 1}, "$currentDate": ...})``
judged by ``matched_count``, with the same write concern, straight through PyMongo: no
header read, no key rule, no error translation, no reconciliation.

Each client's document holds what the adapter must store for a supervised key (tenant,
session, owner, fence, generation, the row), so the floor's server loads and rewrites a
document of the adapter's size; the adapter's own bookkeeping (writer nonce, swap token,
``redo``) is left out, as is everything the adapter's update sets beyond ``rev``."""

from __future__ import annotations

import secrets
from typing import Any

from agentstores_mongo.stores import MongoStores

from ..bench.floor import RawFloor


class MongoFloor(RawFloor):
    name = "PyMongo update_one filtered on the expected rev, judged by matched_count"

    def __init__(self) -> None:
        self.stores: MongoStores | None = None
        self.collection: Any = None
        self.ids: list[str] = []

    async def setup(self, url: str, clients: int) -> None:
        self.stores = MongoStores(url, check_indexes=False)
        await self.stores.open()
        self.collection = self.stores.ctx.keys
        run = secrets.token_hex(4)
        self.ids = [f"asfloor-{run}-{client:08x}" for client in range(clients)]
        await self.collection.insert_many([self.document(i) for i in self.ids])

    @staticmethod
    def document(storage_name: str) -> dict[str, Any]:
        """A client's document at ``rev`` 0, shaped as a supervised key's header."""
        return {
            "_id": storage_name,
            "rev": 0,
            "t": "asfloor",
            "s": storage_name,
            "o": "bench",
            "f": 1,
            "g": secrets.token_hex(16),
            "sup": {"s": "running", "m": "turn", "e": 1},
        }

    async def cas(self, client: int, op: int) -> bool:
        result = await self.collection.update_one(
            {"_id": self.ids[client], "rev": op},
            {"$set": {"rev": op + 1}, "$currentDate": {"hb": True}},
        )
        return bool(result.matched_count == 1)

    async def close(self) -> None:
        if self.stores is None:
            return
        try:
            await self.collection.delete_many({"_id": {"$in": self.ids}})
        finally:
            await self.stores.close()
            self.stores = None
