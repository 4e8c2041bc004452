"""PauseTokenStore on files: one record side file per token, ``tokens/<sha256(id)>``,
whose metadata line holds the id, owner, expiry and status."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.stores import PauseTokenStore, kit

from ._base import FileStoreBase, off_loop
from .codec import record
from .header import ABSENT, LIVE, Head


def token_name(token_id: str) -> str:
    """The side file of a token (ids are never path segments)."""
    return "tokens/" + hashlib.sha256(token_id.encode()).hexdigest()


class FilePauseTokenStore(FileStoreBase, PauseTokenStore):
    def _token(self, kdir: str, h: Head, token_id: str) -> tuple[dict[str, Any], bytes] | None:
        """The committed token ``token_id`` of a live key, as (metadata, payload)."""
        found = self.root.read_record(kdir, h, token_name(token_id))
        if found is not None and found[0]["t"] != token_id:
            raise refusal_error(Refusal.EXISTS, "two pause token ids share a storage digest")
        return found

    @contextmanager
    def _changing(
        self, key: ConversationKey, token_id: str, principal: str
    ) -> Iterator[tuple[str, Head, dict[str, Any], bytes]]:
        """Under the key's exclusive lock: the key directory, header and the token
        ``principal`` may claim or abandon (metadata, payload), or ``NotFoundError``."""
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=False) as exists:
            found, h, status = None, None, ABSENT
            if exists:
                h, status = root.head(kdir, key, root.now_us())
                if status == LIVE and h is not None:
                    root.recover(kdir, h)
                    found = self._token(kdir, h, token_id)
            if h is None or status != LIVE or h["owner"] != principal or found is None:
                raise refusal_error(Refusal.NOT_FOUND, "no such pause token", key=key)
            yield kdir, h, found[0], found[1]

    @off_loop
    def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=True):
            h, status = root.head(kdir, key, root.now_us())
            root.check_write(key, h, status, principal, epoch)
            if status == LIVE and h is not None:
                root.recover(kdir, h)
                if self._token(kdir, h, token_id) is not None:
                    raise refusal_error(
                        Refusal.EXISTS, f"pause token {token_id!r} already exists", key=key
                    )
            new, changed = root.prepare(kdir, key, h, status, principal, epoch)
            root.io.ensure_dir(os.path.join(kdir, "tokens"))
            meta = {"t": token_id, "o": principal, "x": kit.to_micros(expires_at), "s": "pending"}
            root.commit_side(kdir, new, changed, token_name(token_id), record(meta, payload_json))

    @off_loop
    def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        with self._changing(key, token_id, principal) as (kdir, h, meta, payload):
            if meta["s"] != "pending":
                raise refusal_error(
                    Refusal.ALREADY_CLAIMED, f"pause token {token_id!r} is {meta['s']}", key=key
                )
            if meta["x"] <= self.root.now_us():
                raise refusal_error(Refusal.EXPIRED, f"pause token {token_id!r} expired", key=key)
            meta["s"] = "claimed"
            self.root.commit_side(kdir, h, False, token_name(token_id), record(meta, payload))
            return payload

    @off_loop
    def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        with self._changing(key, token_id, principal) as (kdir, h, meta, payload):
            if meta["s"] != "abandoned":
                meta["s"] = "abandoned"
                self.root.commit_side(kdir, h, False, token_name(token_id), record(meta, payload))


__all__ = ["FilePauseTokenStore", "token_name"]
