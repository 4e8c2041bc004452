"""OAuthStore on S3: one object per (user, server) and per (tenant, server), last
write wins; a pending-state index of marker objects pointing at user records (written
before the record, confirmed by it on read).

A delete is guarded by the ETag it read: ``delete_object(IfMatch=...)`` where the store
honours it (``conditional_delete=true``), else a conditional tombstone body written
with ``If-Match`` that readers treat as absent; either way of two racing deletes exactly
one reports True.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agentstores.errors import ConflictError, Refusal, refusal_error
from agentstores.models import ClientInfo, UserIntegration
from agentstores.stores import OAuthStore, kit

from ._base import S3StoreBase, off_loop
from .header import dumps, loads, name_digest

_COLLISION = "two OAuth records share a storage digest; refusing to mix them"
DELETE_ATTEMPTS = 32


def _user_dir(tenant: str, user: str) -> str:
    return f"oauth/u/{name_digest(tenant, user)}/"


def _client_dir(tenant: str) -> str:
    return f"oauth/c/{name_digest(tenant)}/"


def _pending_dir(state: str) -> str:
    return f"oauth/p/{hashlib.sha256(state.encode()).hexdigest()}/"


class S3OAuthStore(S3StoreBase, OAuthStore):
    def _load(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        """A record's body (None when absent or deleted) and its ETag."""
        found = self.root.io.get(name)
        if found is None:
            return None, None
        data = loads(found[0], name)
        return (None if data.get("deleted") else data), found[1]

    def _read_integration(
        self, name: str, tenant: str, user: str, server: str | None
    ) -> UserIntegration | None:
        data, _ = self._load(name)
        if data is None:
            return None
        if (
            data["tenant"] != tenant
            or data["user"] != user
            or (server is not None and data["server"] != server)
        ):
            raise refusal_error(Refusal.EXISTS, _COLLISION)
        return UserIntegration.from_json(data)

    def _listed(self, prefix: str, server_names: list[str] | None) -> list[tuple[str, str | None]]:
        if server_names is None:
            return [(name, None) for name in self.root.io.list(prefix)]
        return [(prefix + name_digest(n), n) for n in dict.fromkeys(server_names)]

    # --- user integrations ---------------------------------------------------------

    @off_loop
    def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        wanted = self._listed(_user_dir(tenant, user), server_names)
        found = self.runner.map(lambda w: self._read_integration(w[0], tenant, user, w[1]), wanted)
        return sorted((r for r in found if r is not None), key=lambda r: r.server_name)

    @off_loop
    def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        name = _user_dir(tenant, user) + name_digest(server_name)
        return self._read_integration(name, tenant, user, server_name)

    @off_loop
    def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        prefix = _pending_dir(state)
        for entry in sorted(self.root.io.list(prefix)):
            u, _, s = entry[len(prefix) :].partition(".")
            data, _ = self._load(f"oauth/u/{u}/{s}")
            pending = None if data is None else data["pending"]
            if data is not None and pending is not None and pending["state"] == state:
                return UserIntegration.from_json(data)
        return None

    @off_loop
    def _save_user_integration(self, record: UserIntegration) -> None:
        io = self.root.io
        u = name_digest(record.tenant, record.user)
        s = name_digest(record.server_name)
        name = _user_dir(record.tenant, record.user) + s
        old = self._read_integration(name, record.tenant, record.user, record.server_name)
        pending = record.pending
        if pending is not None:
            io.put(f"{_pending_dir(pending.state)}{u}.{s}", b"")
        io.put(name, dumps({**record.to_json(), "w": kit.writer_nonce_hex()}))
        if (
            old is not None
            and old.pending is not None
            and (pending is None or pending.state != old.pending.state)
        ):
            io.delete(f"{_pending_dir(old.pending.state)}{u}.{s}")

    def _guarded_delete(self, name: str) -> dict[str, Any] | None:
        """Remove the record ``name`` if present; the body it removed, or None."""
        io = self.root.io
        for _ in range(DELETE_ATTEMPTS):
            data, etag = self._load(name)
            if data is None or etag is None:
                return None
            if self.root.conditional_delete:
                if io.delete(name, if_match=etag):
                    return data
            elif io.put(name, dumps({"deleted": True, "w": kit.writer_nonce_hex()}), if_match=etag):
                return data
        raise ConflictError("the OAuth record kept changing under this delete; retry")

    @off_loop
    def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        s = name_digest(server_name)
        data = self._guarded_delete(_user_dir(tenant, user) + s)
        if data is None:
            return False
        if data["pending"] is not None:
            u = name_digest(tenant, user)
            self.root.io.delete(f"{_pending_dir(data['pending']['state'])}{u}.{s}")
        return True

    # --- client info ---------------------------------------------------------------

    def _read_client(self, name: str, tenant: str, server: str | None) -> ClientInfo | None:
        data, _ = self._load(name)
        if data is None:
            return None
        if data["tenant"] != tenant or (server is not None and data["server"] != server):
            raise refusal_error(Refusal.EXISTS, _COLLISION)
        return ClientInfo.from_json(data)

    @off_loop
    def _list_client_info(self, tenant: str, server_names: list[str] | None) -> list[ClientInfo]:
        wanted = self._listed(_client_dir(tenant), server_names)
        found = self.runner.map(lambda w: self._read_client(w[0], tenant, w[1]), wanted)
        return sorted((r for r in found if r is not None), key=lambda r: r.server_name)

    @off_loop
    def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        return self._read_client(
            _client_dir(tenant) + name_digest(server_name), tenant, server_name
        )

    @off_loop
    def _save_client_info(self, record: ClientInfo) -> None:
        body = {**record.to_json(), "w": kit.writer_nonce_hex()}
        self.root.io.put(_client_dir(record.tenant) + name_digest(record.server_name), dumps(body))


__all__ = ["S3OAuthStore"]
