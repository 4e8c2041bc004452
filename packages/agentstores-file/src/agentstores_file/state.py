"""AgentStateStore on files: the blob is the side file ``state``, raw, replaced atomically
(through the header's redo list when the same write claims the key or raises its fence)."""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.stores import AgentStateStore

from ._base import FileStoreBase, off_loop
from .header import ABSENT, EXPIRED

_NAME = "state"


class FileAgentStateStore(FileStoreBase, AgentStateStore):
    @off_loop
    def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        root = self.root
        kdir = root.key_dir(key)
        h, status = root.head(kdir, key, root.now_us())
        if not root.can_read(h, status, principal) or h is None:
            return None
        return root.read_side(kdir, h, _NAME)

    @off_loop
    def _save(self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None) -> None:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=True):
            h, status = root.head(kdir, key, root.now_us())
            root.check_write(key, h, status, principal, epoch)
            root.recover(kdir, h)
            new, changed = root.prepare(kdir, key, h, status, principal, epoch)
            root.commit_side(kdir, new, changed, _NAME, blob)

    @off_loop
    def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return
            h, status = root.head(kdir, key, root.now_us())
            if status in (ABSENT, EXPIRED) or h is None:
                return
            root.check_write(key, h, status, principal, epoch)
            root.recover(kdir, h)
            new, changed = root.prepare(kdir, key, h, status, principal, epoch)
            if root.read_side(kdir, h, _NAME) is not None:
                root.commit_side(kdir, new, changed, _NAME, b"")
            elif changed:
                root.put_head(kdir, new)


__all__ = ["FileAgentStateStore"]
