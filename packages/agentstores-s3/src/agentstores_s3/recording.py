"""RecordingStore on S3: the latest event of a key lives in its header (message id,
epoch, index and the message as JSON text), so a put is one conditional header write."""

from __future__ import annotations

import json

from agentstores.keys import ConversationKey
from agentstores.models import RecordedEvent
from agentstores.stores import RecordingStore, kit

from ._base import S3StoreBase, off_loop
from .header import LIVE, Head, Outcome


class S3RecordingStore(S3StoreBase, RecordingStore):
    @off_loop
    def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        root = self.root
        text = message_json.decode()

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            root.check(key, h, status, principal, event.epoch)
            rec = h["rec"] if status == LIVE and h is not None else None
            mark = None if rec is None else (rec["m"], rec["e"], rec["i"])
            if not kit.check_recording_put(key, event, mark):
                return Outcome(None, False)
            new = root.claim(key, h, status, principal, event.epoch)
            new["rec"] = {"m": event.message_id, "e": event.epoch, "i": event.index, "b": text}
            return Outcome(new, True)

        return bool(root.transact(key, decide))

    @off_loop
    def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        h, status, _ = self.root.read(key)
        if not self.root.visible(h, status, principal) or h is None or h["rec"] is None:
            return None
        rec = h["rec"]
        return RecordedEvent(rec["i"], json.loads(rec["b"]), rec["m"], rec["e"])

    @off_loop
    def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        root = self.root

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            if status not in (LIVE, "erased") or h is None:
                return Outcome(None, False)
            root.check(key, h, status, principal, epoch)
            new = root.claim(key, h, status, principal, epoch)
            rec = h["rec"]
            if rec is None or rec["m"] != message_id:
                return Outcome(new if new["fence"] != h["fence"] else None, False)
            new["rec"] = None
            return Outcome(new, True)

        return bool(root.transact(key, decide))


__all__ = ["S3RecordingStore"]
