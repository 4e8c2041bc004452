"""The recording: ``rc`` (message id, epoch, index) and ``rb`` (the body) in the key's
header, so one CAS checks the fence and replaces the snapshot; ordinary header reads
leave the body on the server."""

from __future__ import annotations

import json

from agentstores.keys import ConversationKey
from agentstores.models import RecordedEvent
from agentstores.stores import RecordingStore, kit

from ._base import MongoStoreBase, resent
from .header import ABSENT, EXPIRED, RETRY, Header, Retry, commit, ensure_header, read_header, write


class MongoRecordingStore(MongoStoreBase, RecordingStore):
    @resent
    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        ctx = self.ctx

        async def attempt(h: Header) -> bool | Retry:
            h.check_write(principal, event.epoch)
            rc = h.get("rc")
            mark = None if rc is None else (rc["m"], rc["e"], rc["i"])
            if not kit.check_recording_put(key, event, mark):
                return False
            if h.doc is None:
                await ensure_header(ctx, key)
                return RETRY
            fields, _ = h.claim(principal)
            fields["f"] = kit.raised_fence(h.fence, event.epoch)
            fields["rc"] = {"m": event.message_id, "e": event.epoch, "i": event.index}
            fields["rb"] = message_json.decode("utf-8")
            return True if await commit(ctx, h, fields) else RETRY

        return await write(ctx, key, attempt)

    @resent
    async def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        h = await read_header(self.ctx, key, body=True)
        if not h.can_read(principal):
            return None
        rc = h.get("rc")
        if rc is None:
            return None
        return RecordedEvent(rc["i"], json.loads(h.get("rb")), rc["m"], rc["e"])

    @resent
    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        ctx = self.ctx

        async def attempt(h: Header) -> bool | Retry:
            if h.status in (ABSENT, EXPIRED):
                return False
            h.check_write(principal, epoch)
            fence = kit.raised_fence(h.fence, epoch)
            rc = h.get("rc")
            if rc is None or rc["m"] != message_id:
                if fence != h.fence:
                    return False if await commit(ctx, h, {"f": fence}) else RETRY
                return False
            return True if await commit(ctx, h, {"f": fence, "rc": None, "rb": None}) else RETRY

        return await write(ctx, key, attempt)


__all__ = ["MongoRecordingStore"]
