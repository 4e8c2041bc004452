"""AgentStateStore on S3: each save writes the blob to a fresh object ``s/<nonce>``, then
points the key header at it with a conditional write (the commit point); the blob it
replaced is removed afterwards, on a best-effort basis (a failure there once made a save
that had committed report an error and remove its own blob, which the header named: the
network-fault run caught an acknowledged state read back as none). A reader that finds
the blob gone re-reads the header."""

from __future__ import annotations

import contextlib

from agentstores.errors import UnknownOutcomeError
from agentstores.keys import ConversationKey
from agentstores.stores import AgentStateStore, kit

from ._base import S3StoreBase, off_loop
from .header import LIVE, Head, Outcome

READ_ATTEMPTS = 8


class S3AgentStateStore(S3StoreBase, AgentStateStore):
    def _blob(self, key: ConversationKey, nonce: str) -> str:
        return self.root.key_dir(key) + "s/" + nonce

    @off_loop
    def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        root = self.root
        for _ in range(READ_ATTEMPTS):
            h, status, _ = root.read(key)
            if not root.visible(h, status, principal) or h is None or h["state"] is None:
                return None
            found = root.io.get(self._blob(key, h["state"]))
            if found is not None:
                return found[0]
        return None

    def _swap(
        self, key: ConversationKey, principal: str, nonce: str | None, epoch: int | None
    ) -> None:
        root = self.root
        replaced: list[str] = []

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            replaced.clear()
            if nonce is None and (status != LIVE or h is None):
                root.check(key, h, status, principal, epoch)
                return Outcome(None, None)
            root.check(key, h, status, principal, epoch)
            new = root.claim(key, h, status, principal, epoch)
            old = new["state"]
            if old is None and nonce is None and h is not None and new["fence"] == h["fence"]:
                return Outcome(None, None)
            new["state"] = nonce
            if old is not None:
                replaced.append(old)
            return Outcome(new, None)

        root.transact(key, decide)
        # Committed: from here on nothing may fail the call, or _save would remove the
        # blob the header now names. The blob replaced is garbage (no header names it,
        # and readers ignore it), removed on a best-effort basis.
        for old in replaced:
            with contextlib.suppress(Exception):
                root.io.delete(self._blob(key, old))

    @off_loop
    def _save(self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None) -> None:
        nonce = kit.writer_nonce_hex()
        name = self._blob(key, nonce)
        self.root.io.put(name, blob)
        try:
            self._swap(key, principal, nonce, epoch)
        except UnknownOutcomeError:
            raise  # the header may name the blob: it must stay
        except BaseException:
            self.root.io.delete(name)
            raise

    @off_loop
    def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        self._swap(key, principal, None, epoch)


__all__ = ["S3AgentStateStore"]
