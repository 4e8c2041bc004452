"""OAuth integrations and client info: one document per record, last write wins
(``replace_one`` on the record's own key, else ``insert_one``; no upsert: nx-27017's
``replace_one(upsert=True)`` ignores the filter's ``_id`` and inserts a new document).

``<prefix>oauth_users``: ``_id`` = encoded (tenant, user, server), fields t, u, n, ps
(the pending authorization's state, indexed for the lookup across every user), d (the
record as JSON text, :meth:`UserIntegration.to_json`). ``<prefix>oauth_clients``: ``_id``
= encoded (tenant, server)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentstores.keys import encode_component
from agentstores.models import ClientInfo, UserIntegration
from agentstores.stores import OAuthStore

from ._base import MongoStoreBase, resent
from .errors import LostReply, is_connection_error, maybe_sent


def _id(*parts: str) -> str:
    return ":".join(encode_component(p) for p in parts)


def _encode(record: UserIntegration) -> str:
    return json.dumps(record.to_json(), separators=(",", ":"))


def _decode(doc: dict[str, Any]) -> UserIntegration:
    return UserIntegration.from_json(json.loads(doc["d"]))


async def _put(collection: Any, doc: dict[str, Any]) -> None:
    """Last write wins on ``doc["_id"]``: replace it, or create it when absent. A lost
    reply is resent: writing the same record again is the same last write."""
    for attempt in range(3):
        try:
            await _replace_or_insert(collection, doc)
            return
        except Exception as exc:
            if not is_connection_error(exc) or attempt == 2:
                raise
            await asyncio.sleep(0.2)


async def _replace_or_insert(collection: Any, doc: dict[str, Any]) -> None:
    from pymongo.errors import DuplicateKeyError

    while True:
        replaced = await collection.replace_one({"_id": doc["_id"]}, doc)
        if replaced.matched_count:
            return
        try:
            await collection.insert_one(doc)
            return
        except DuplicateKeyError:
            continue


def _names(server_names: list[str] | None) -> dict[str, Any]:
    return {} if server_names is None else {"n": {"$in": server_names}}


class MongoOAuthStore(MongoStoreBase, OAuthStore):
    @resent
    async def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        found = self.ctx.oauth_users.find({"t": tenant, "u": user, **_names(server_names)})
        records = [_decode(d) async for d in found]
        return sorted(records, key=lambda r: r.server_name)

    @resent
    async def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        doc = await self.ctx.oauth_users.find_one({"_id": _id(tenant, user, server_name)})
        return None if doc is None else _decode(doc)

    @resent
    async def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        found = self.ctx.oauth_users.find({"ps": state}).sort("_id", 1).limit(1)
        docs = [d async for d in found]
        return _decode(docs[0]) if docs else None

    @resent
    async def _save_user_integration(self, record: UserIntegration) -> None:
        doc = {
            "_id": _id(record.tenant, record.user, record.server_name),
            "t": record.tenant,
            "u": record.user,
            "n": record.server_name,
            "ps": None if record.pending is None else record.pending.state,
            "d": _encode(record),
        }
        await _put(self.ctx.oauth_users, doc)

    @resent
    async def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        try:
            result = await self.ctx.oauth_users.delete_one({"_id": _id(tenant, user, server_name)})
        except Exception as exc:
            if maybe_sent(exc):
                raise LostReply(f"deleting the integration: {exc}") from exc
            raise
        return bool(result.deleted_count)

    @resent
    async def _list_client_info(
        self, tenant: str, server_names: list[str] | None
    ) -> list[ClientInfo]:
        found = self.ctx.oauth_clients.find({"t": tenant, **_names(server_names)})
        records = [ClientInfo(d["t"], d["n"], json.loads(d["d"])) async for d in found]
        return sorted(records, key=lambda r: r.server_name)

    @resent
    async def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        doc = await self.ctx.oauth_clients.find_one({"_id": _id(tenant, server_name)})
        return None if doc is None else ClientInfo(doc["t"], doc["n"], json.loads(doc["d"]))

    @resent
    async def _save_client_info(self, record: ClientInfo) -> None:
        doc = {
            "_id": _id(record.tenant, record.server_name),
            "t": record.tenant,
            "n": record.server_name,
            "d": json.dumps(dict(record.client_info), separators=(",", ":")),
        }
        await _put(self.ctx.oauth_clients, doc)


__all__ = ["MongoOAuthStore"]
