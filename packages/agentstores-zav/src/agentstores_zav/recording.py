"""The SDK's ChatStreamRecordingStore on agentstores' fenced recording."""

from __future__ import annotations

import logging

from zav.agents_sdk.domain.chat_stream_recording_store import (
    ChatStreamRecordingStore,
    RecordedStreamEvent,
)

from agentstores import ConversationKey, FencedError, RecordedEvent, Stores

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

    A takeover resumes the *same* turn (same message id) from an older checkpoint, with
    its yield index starting again at 0, while the SDK's recording follower serves only
    snapshots whose index is above the last it served: a second screen following across
    the takeover would see nothing more and end on the dead producer's partial answer.
    So a successor's snapshots are held back until their content is at least as long as
    the predecessor's snapshot, then stored with indices continuing above its index:
    followers see the answer grow without a rollback and reach its end.
    """

    MAX_TRACKED = 4096

    def __init__(self, bundle: Bundle) -> None:
        self._bundle = bundle
        self._bases: dict[tuple[ConversationKey, str, int], int] = {}

    async def put(
        self,
        tenant: str,
        requester_uuid: str | None,
        session_id: str,
        event: RecordedStreamEvent,
    ) -> None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        epoch = event.epoch + offset_of(key)
        async with sdk_errors(stores, key, principal):
            base = await self._index_base(stores, key, principal, event, epoch)
            if base is None:
                return  # behind the predecessor's snapshot: held back
            record = RecordedEvent(
                index=event.index + base,
                message=message_to_json(event.message),
                message_id=event.message_id,
                epoch=epoch,
            )
            try:
                await stores.recording.put(key, principal, record)
            except FencedError as exc:
                log.info("fenced recording write dropped for %r: %s", key, exc)

    async def _index_base(
        self,
        stores: Stores,
        key: ConversationKey,
        principal: str,
        event: RecordedStreamEvent,
        epoch: int,
    ) -> int | None:
        """What to add to this epoch's indices; None while the snapshot is held back."""
        slot = (key, event.message_id, epoch)
        if slot in self._bases:
            return self._bases[slot]
        current = await stores.recording.read(key, principal)
        base = 0
        if current is not None and current.message_id == event.message_id and current.epoch < epoch:
            previous = current.message.get("content") if isinstance(current.message, dict) else ""
            if len(event.message.content) < len(previous or ""):
                return None
            base = current.index + 1
        if len(self._bases) >= self.MAX_TRACKED:
            self._bases.pop(next(iter(self._bases)))
        self._bases[slot] = base
        return base

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
        async with sdk_errors(stores, key, principal):
            try:
                await stores.recording.delete(key, principal, message_id)
            except FencedError as exc:
                log.info("fenced recording delete dropped for %r: %s", key, exc)


__all__ = ["AgentStoresRecordingStore"]
