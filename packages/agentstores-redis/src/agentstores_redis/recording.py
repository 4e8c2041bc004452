"""RecordingStore on Redis: one overwritten hash per conversation, fenced in its script."""

from __future__ import annotations

import json

from agentstores.keys import ConversationKey
from agentstores.models import RecordedEvent
from agentstores.stores import RecordingStore

from ._base import RedisStoreBase, claim_args, epoch_arg, raise_for, text
from .lua import REC_DELETE, REC_PUT, REC_READ


class RedisRecordingStore(RedisStoreBase, RecordingStore):
    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        names = self.ctx.keys.conv(key)
        args = claim_args(
            principal, key, str(event.index), message_json, event.message_id, str(event.epoch)
        )
        reply = await self._write(
            REC_PUT,
            [names.header, names.recording, *names.wake],
            args,
            from_result=lambda r: [b"ok", r],
        )
        raise_for(reply, key, epoch=event.epoch)
        return bool(reply[1] == b"1")

    async def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        names = self.ctx.keys.conv(key)
        reply = await self.ctx.client.read(REC_READ, [names.header, names.recording], [principal])
        if not reply or reply[0] is None:
            return None
        index, message, mid, epoch = reply
        return RecordedEvent(int(index), json.loads(message), text(mid), int(epoch))

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        names = self.ctx.keys.conv(key)
        args = claim_args(principal, key, message_id, epoch_arg(epoch))
        reply = await self._write(
            REC_DELETE,
            [names.header, names.recording, *names.wake],
            args,
            from_result=lambda r: [b"ok", r],
        )
        raise_for(reply, key, epoch=epoch)
        return bool(reply[1] == b"1")
