"""OAuthStore on files: one record file per (user, server) and per (tenant, server),
each folder under its own lock, and a pending-state index of marker files that point at
user records (written before the record, confirmed by it on read)."""

from __future__ import annotations

import hashlib
import os

from agentstores.errors import Refusal, refusal_error
from agentstores.models import ClientInfo, UserIntegration
from agentstores.stores import OAuthStore

from ._base import FileStoreBase, off_loop
from .codec import loads, reencode
from .header import name_digest

_COLLISION = "two OAuth records share a storage digest; refusing to mix them"


def _record_name(server_name: str) -> str:
    return name_digest(server_name) + ".rec"


class FileOAuthStore(FileStoreBase, OAuthStore):
    # --- paths -------------------------------------------------------------------

    def _user_dir(self, tenant: str, user: str) -> tuple[str, str]:
        u = name_digest(tenant, user)
        return u, os.path.join(self.root.oauth_root, "u", u[:2], u)

    def _client_dir(self, tenant: str) -> str:
        t = name_digest(tenant)
        return os.path.join(self.root.oauth_root, "c", t[:2], t)

    def _pending_dir(self, state: str) -> str:
        p = hashlib.sha256(state.encode()).hexdigest()
        return os.path.join(self.root.oauth_root, "pending", p[:2], p)

    # --- user integrations -------------------------------------------------------

    def _read_integration(
        self, path: str, tenant: str, user: str, server: str | None
    ) -> UserIntegration | None:
        raw = self.root.io.read_file(path)
        if raw is None:
            return None
        data = loads(raw, path)
        if (
            data["tenant"] != tenant
            or data["user"] != user
            or (server is not None and data["server"] != server)
        ):
            raise refusal_error(Refusal.EXISTS, _COLLISION)
        return UserIntegration.from_json(data)

    @off_loop
    def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        _, udir = self._user_dir(tenant, user)
        if server_names is None:
            files = [n for n in self.root.io.listdir(udir) if n.endswith(".rec")]
            wanted: list[tuple[str, str | None]] = [(n, None) for n in files]
        else:
            wanted = [(_record_name(n), n) for n in dict.fromkeys(server_names)]
        found = []
        for name, server in wanted:
            record = self._read_integration(os.path.join(udir, name), tenant, user, server)
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: r.server_name)

    @off_loop
    def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        _, udir = self._user_dir(tenant, user)
        return self._read_integration(
            os.path.join(udir, _record_name(server_name)), tenant, user, server_name
        )

    @off_loop
    def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        io = self.root.io
        for entry in sorted(io.listdir(self._pending_dir(state))):
            u, _, s = entry.partition(".")
            if len(u) != 64 or len(s) != 64:
                continue
            path = os.path.join(self.root.oauth_root, "u", u[:2], u, s + ".rec")
            raw = io.read_file(path)
            if raw is None:
                continue
            data = loads(raw, path)
            if data["pending"] is not None and data["pending"]["state"] == state:
                # Built from the very bytes matched: a second read could see a save that
                # landed since, a record no longer pending on this state.
                return UserIntegration.from_json(data)
        return None

    @off_loop
    def _save_user_integration(self, record: UserIntegration) -> None:
        io = self.root.io
        u, udir = self._user_dir(record.tenant, record.user)
        name = _record_name(record.server_name)
        path = os.path.join(udir, name)
        with self.root.locked(udir, exclusive=True, create=True):
            old = self._read_integration(path, record.tenant, record.user, record.server_name)
            pending = record.pending
            if pending is not None:
                # The index entry exists before the record that it points to.
                pdir = self._pending_dir(pending.state)
                io.ensure_dir(pdir)
                io.create_empty(os.path.join(pdir, f"{u}.{name[:-4]}"))
            io.replace_file(path, reencode(record.to_json()))
            if (
                old is not None
                and old.pending is not None
                and (pending is None or pending.state != old.pending.state)
            ):
                self._unindex(old.pending.state, u, name)

    def _unindex(self, state: str, u: str, name: str) -> None:
        pdir = self._pending_dir(state)
        if self.root.io.unlink(os.path.join(pdir, f"{u}.{name[:-4]}")):
            self.root.io.sync_dir(pdir)

    @off_loop
    def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        io = self.root.io
        u, udir = self._user_dir(tenant, user)
        name = _record_name(server_name)
        path = os.path.join(udir, name)
        with self.root.locked(udir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            old = self._read_integration(path, tenant, user, server_name)
            if old is None:
                return False
            io.unlink(path)
            io.sync_dir(udir)
            if old.pending is not None:
                self._unindex(old.pending.state, u, name)
            return True

    # --- client info -------------------------------------------------------------

    def _read_client(self, path: str, tenant: str, server: str | None) -> ClientInfo | None:
        raw = self.root.io.read_file(path)
        if raw is None:
            return None
        data = loads(raw, path)
        if data["tenant"] != tenant or (server is not None and data["server"] != server):
            raise refusal_error(Refusal.EXISTS, _COLLISION)
        return ClientInfo.from_json(data)

    @off_loop
    def _list_client_info(self, tenant: str, server_names: list[str] | None) -> list[ClientInfo]:
        cdir = self._client_dir(tenant)
        if server_names is None:
            wanted: list[tuple[str, str | None]] = [
                (n, None) for n in self.root.io.listdir(cdir) if n.endswith(".rec")
            ]
        else:
            wanted = [(_record_name(n), n) for n in dict.fromkeys(server_names)]
        found = []
        for name, server in wanted:
            record = self._read_client(os.path.join(cdir, name), tenant, server)
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: r.server_name)

    @off_loop
    def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        return self._read_client(
            os.path.join(self._client_dir(tenant), _record_name(server_name)), tenant, server_name
        )

    @off_loop
    def _save_client_info(self, record: ClientInfo) -> None:
        cdir = self._client_dir(record.tenant)
        with self.root.locked(cdir, exclusive=True, create=True):
            self.root.io.replace_file(
                os.path.join(cdir, _record_name(record.server_name)), reencode(record.to_json())
            )


__all__ = ["FileOAuthStore"]
