"""The recording: the latest cumulative snapshot of the in-flight answer."""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.models import RecordedEvent
from agentstores.stores import RecordingStore

from ._base import TemplateStoreBase


class TemplateRecordingStore(TemplateStoreBase, RecordingStore):
    """Keeps the rules in :class:`RecordingStore`'s docstring."""

    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        raise NotImplementedError(
            "RecordingStore rule put: kit.check_write, then kit.check_recording_put on the "
            "stored record (False: change nothing), then kit.raised_fence"
        )

    async def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        raise NotImplementedError("RecordingStore rule read: the record, None unless kit.can_read")

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        raise NotImplementedError(
            "RecordingStore rule delete: remove iff the record is message_id's; epoch fenced "
            "by kit.check_write"
        )
