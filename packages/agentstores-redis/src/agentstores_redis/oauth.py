"""OAuthStore on Redis: last-write-wins records in per-(tenant, user) and per-tenant
hashes, and per pending ``state`` a set of pointers for the lookup across every user
(a set, not one pointer: two records may carry the same state, and deleting one must
not hide the other).

The pointer lives in another slot than the record, so it is written *before* the record
and removed *after* it, and every lookup re-checks the record it points at: a pointer
left behind by a crash is ignored, never followed to the wrong record.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from agentstores.errors import UnknownOutcomeError
from agentstores.models import ClientInfo, UserIntegration
from agentstores.stores import OAuthStore

from ._base import RedisStoreBase, text
from .client import Uncertain
from .lua import HASH_SWAP

log = logging.getLogger(__name__)


def _encode_integration(record: UserIntegration) -> bytes:
    return json.dumps(record.to_json(), separators=(",", ":")).encode()


def _decode_integration(raw: bytes) -> UserIntegration:
    return UserIntegration.from_json(json.loads(raw))


def _pointer(tenant: str, user: str, server_name: str) -> bytes:
    return json.dumps([tenant, user, server_name], separators=(",", ":")).encode()


def _state_of(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    pending = json.loads(raw).get("pending")
    return None if pending is None else str(pending["state"])


class RedisOAuthStore(RedisStoreBase, OAuthStore):
    async def _hash_swap(self, key: str, field: str, value: bytes | None, what: str) -> Any:
        args: list[Any] = [field] if value is None else [field, value]
        try:
            return await self.ctx.client.write(HASH_SWAP, [key], args)
        except Uncertain as exc:
            raise UnknownOutcomeError(
                f"{what}: connection lost after the request was sent; it may or may not "
                "have been applied"
            ) from exc

    async def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        key = self.ctx.keys.oauth_user(tenant, user)
        if server_names is None:
            flat = await self.ctx.client.command(key, "HGETALL", key)
            values = [flat[i + 1] for i in range(0, len(flat), 2)]
        elif not server_names:
            return []
        else:
            names = sorted(set(server_names))
            values = await self.ctx.client.command(key, "HMGET", key, *names)
        found = [_decode_integration(v) for v in values if v is not None]
        return sorted(found, key=lambda r: r.server_name)

    async def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        key = self.ctx.keys.oauth_user(tenant, user)
        raw = await self.ctx.client.command(key, "HGET", key, server_name)
        return None if raw is None else _decode_integration(raw)

    async def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        pointer_key = self.ctx.keys.oauth_state(state)
        members = await self.ctx.client.command(pointer_key, "SMEMBERS", pointer_key)
        for pointer in sorted(members):
            tenant, user, server_name = json.loads(pointer)
            record = await self._get_user_integration(tenant, user, server_name)
            if record is not None and record.pending is not None and record.pending.state == state:
                return record
        return None

    async def _save_user_integration(self, record: UserIntegration) -> None:
        ks = self.ctx.keys
        key = ks.oauth_user(record.tenant, record.user)
        me = _pointer(record.tenant, record.user, record.server_name)
        if record.pending is not None:
            pointer_key = ks.oauth_state(record.pending.state)
            await self.ctx.client.command(pointer_key, "SADD", pointer_key, me)
        old = await self._hash_swap(
            key, record.server_name, _encode_integration(record), "save_user_integration"
        )
        old_state = _state_of(old)
        new_state = None if record.pending is None else record.pending.state
        if old_state is not None and old_state != new_state:
            await self._drop_pointer(old_state, me)

    async def _drop_pointer(self, state: str, me: bytes) -> None:
        pointer_key = self.ctx.keys.oauth_state(state)
        try:
            await self.ctx.client.command(pointer_key, "SREM", pointer_key, me)
        except Exception as exc:  # a stale pointer is harmless: lookups re-check it
            log.warning("agentstores-redis: stale OAuth state pointer left: %s", exc)

    async def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        key = self.ctx.keys.oauth_user(tenant, user)
        old = await self._hash_swap(key, server_name, None, "delete_user_integration")
        if old is None:
            return False
        state = _state_of(old)
        if state is not None:
            await self._drop_pointer(state, _pointer(tenant, user, server_name))
        return True

    async def _list_client_info(
        self, tenant: str, server_names: list[str] | None
    ) -> list[ClientInfo]:
        key = self.ctx.keys.oauth_clients(tenant)
        if server_names is None:
            flat = await self.ctx.client.command(key, "HGETALL", key)
            pairs = [(text(flat[i]), flat[i + 1]) for i in range(0, len(flat), 2)]
        elif not server_names:
            return []
        else:
            names = sorted(set(server_names))
            values = await self.ctx.client.command(key, "HMGET", key, *names)
            pairs = [(n, v) for n, v in zip(names, values, strict=True) if v is not None]
        found = [ClientInfo(tenant, name, json.loads(v)) for name, v in pairs]
        return sorted(found, key=lambda r: r.server_name)

    async def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        key = self.ctx.keys.oauth_clients(tenant)
        raw = await self.ctx.client.command(key, "HGET", key, server_name)
        return None if raw is None else ClientInfo(tenant, server_name, json.loads(raw))

    async def _save_client_info(self, record: ClientInfo) -> None:
        key = self.ctx.keys.oauth_clients(record.tenant)
        value = json.dumps(dict(record.client_info), separators=(",", ":")).encode()
        await self._hash_swap(key, record.server_name, value, "save_client_info")
