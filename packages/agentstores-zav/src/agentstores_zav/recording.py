"""The SDK's ChatStreamRecordingStore on agentstores' fenced recording."""

from __future__ import annotations

import logging

from zav.agents_sdk.domain.chat_stream_recording_store import (
    ChatStreamRecordingStore,
    RecordedStreamEvent,
)

from agentstores import FencedError, RecordedEvent

from .bundle import Bundle
from .epochs import offset_of
from .errors import sdk_errors
from .keys import key_of
from .messages import message_from_json, message_to_json

log = logging.getLogger(__name__)


class AgentStoresRecordingStore(ChatStreamRecordingStore):
    """One snapshot per conversation; a write below the key's fence changes nothing.

    A fenced ``put`` is dropped, as the SDK's own store drops it: the producer learns it
    lost the lease from its next heartbeat. ``delete`` carries the producing task's
    lease epoch, so a fenced producer's late cleanup cannot remove its successor's row.
    """

    def __init__(self, bundle: Bundle) -> None:
        self._bundle = bundle

    async def put(
        self,
        tenant: str,
        requester_uuid: str | None,
        session_id: str,
        event: RecordedStreamEvent,
    ) -> None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        record = RecordedEvent(
            index=event.index,
            message=message_to_json(event.message),
            message_id=event.message_id,
            epoch=event.epoch + offset_of(key),
        )
        with sdk_errors(key, principal):
            try:
                await stores.recording.put(key, principal, record)
            except FencedError as exc:
                log.info("fenced recording write dropped for %r: %s", key, exc)

    async def read(
        self, tenant: str, requester_uuid: str | None, session_id: str
    ) -> RecordedStreamEvent | None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        record = await stores.recording.read(key, principal)
        if record is None:
            return None
        return RecordedStreamEvent(
            index=record.index,
            message=message_from_json(record.message),
            message_id=record.message_id,
            epoch=record.epoch - offset_of(key),
        )

    async def delete(
        self, tenant: str, requester_uuid: str | None, session_id: str, message_id: str
    ) -> None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        with sdk_errors(key, principal):
            try:
                await stores.recording.delete(key, principal, message_id)
            except FencedError as exc:
                log.info("fenced recording delete dropped for %r: %s", key, exc)


__all__ = ["AgentStoresRecordingStore"]
