"""RecordingStore on files: the latest event of a key is one record side file,
``recording`` (its metadata line holds message id, epoch and index)."""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.models import RecordedEvent
from agentstores.stores import RecordingStore, kit

from ._base import FileStoreBase, off_loop
from .codec import loads, record
from .header import ABSENT, EXPIRED, LIVE

_NAME = "recording"


class FileRecordingStore(FileStoreBase, RecordingStore):
    @off_loop
    def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=True):
            h, status = root.head(kdir, key, root.now_us())
            root.check_write(key, h, status, principal, event.epoch)
            mark = None
            if status == LIVE and h is not None:
                root.recover(kdir, h)
                current = root.read_record(kdir, h, _NAME)
                if current is not None:
                    mark = (current[0]["m"], current[0]["e"], current[0]["i"])
            if not kit.check_recording_put(key, event, mark):
                return False
            new, changed = root.prepare(kdir, key, h, status, principal, event.epoch)
            meta = {"m": event.message_id, "e": event.epoch, "i": event.index}
            root.commit_side(kdir, new, changed, _NAME, record(meta, message_json))
            return True

    @off_loop
    def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        root = self.root
        kdir = root.key_dir(key)
        h, status = root.head(kdir, key, root.now_us())
        if not root.can_read(h, status, principal) or h is None:
            return None
        found = root.read_record(kdir, h, _NAME)
        if found is None:
            return None
        meta, body = found
        return RecordedEvent(meta["i"], loads(body, _NAME), meta["m"], meta["e"])

    @off_loop
    def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            h, status = root.head(kdir, key, root.now_us())
            if status in (ABSENT, EXPIRED) or h is None:
                return False
            root.check_write(key, h, status, principal, epoch)
            root.recover(kdir, h)
            found = root.read_record(kdir, h, _NAME)
            new, changed = root.prepare(kdir, key, h, status, principal, epoch)
            if found is None or found[0]["m"] != message_id:
                if changed:
                    root.put_head(kdir, new)
                return False
            root.commit_side(kdir, new, changed, _NAME, b"")
            return True


__all__ = ["FileRecordingStore"]
