"""RecordingStore: the latest cumulative snapshot of the in-flight answer (one per conversation)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..errors import UsageError
from ..keys import ConversationKey, validate_id, validate_principal
from ..models import RecordedEvent
from ._base import StoreBase, check_epoch, check_key, encode_json
from .ambient import write_epoch

MAX_RECORDING_BYTES = 16 * 1024 * 1024


class RecordingStore(StoreBase, ABC):
    """Rules every backend keeps:

    - ``put`` raises ``FencedError`` (and changes nothing) when ``event.epoch`` is below
      the key's fence or the stored record's epoch; returns False (changes nothing) when
      the stored record has the same ``message_id`` and epoch and a higher ``index``;
      otherwise overwrites the one record, raises the fence to ``event.epoch`` and
      returns True (:func:`agentstores.stores.kit.check_recording_put` is this rule, for
      an engine written in Python). ``NotOwnedError`` for another principal's key,
      ``ErasedError`` on an erased key.
    - ``read`` returns the record, or None (also for a principal it is not visible to).
    - ``delete`` removes the record iff it belongs to ``message_id``; ``epoch``, when
      given, is fenced like any write.
    """

    async def put(self, key: ConversationKey, principal: str, event: RecordedEvent) -> bool:
        """Replace the conversation's one recorded snapshot with ``event``.

        Returns:
            True if stored; False (nothing changed) when the stored snapshot has the same
            message id and epoch and a higher index.

        Raises:
            UsageError: a malformed key, principal or event, or a snapshot over 16 MiB.
            FencedError: ``event.epoch`` is below the key's fence or the stored snapshot's.
            NotOwnedError: another principal owns the key.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        if not isinstance(event, RecordedEvent):
            raise UsageError(f"event must be a RecordedEvent, got {type(event).__name__}")
        message = encode_json(event.message, "recorded message", MAX_RECORDING_BYTES)
        async with self.translating_errors("recording.put", key):
            stored = await self._put(key, principal, event, message)
        if stored:
            self.woke(key)
        return stored

    async def read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        """The recorded snapshot, or None (also for a principal it is not visible to).

        Raises:
            UsageError: a malformed key or principal.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        async with self.translating_errors("recording.read", key):
            return await self._read(key, principal)

    async def delete(
        self, key: ConversationKey, principal: str, message_id: str, *, epoch: int | None = None
    ) -> bool:
        """Remove the snapshot iff it belongs to ``message_id``; ``epoch`` is fenced.

        Returns:
            True if this call removed it.

        Raises:
            UsageError: a malformed key, principal, message id or epoch.
            FencedError: ``epoch`` is below the key's fence.
            NotOwnedError: another principal owns the key.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        validate_id(message_id, "message_id")
        epoch = write_epoch(key, check_epoch(epoch))
        async with self.translating_errors("recording.delete", key):
            removed = await self._delete(key, principal, message_id, epoch)
        if removed:
            self.woke(key)
        return removed

    @abstractmethod
    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        """``message_json`` is ``event.message`` already encoded (canonical JSON, UTF-8)."""

    @abstractmethod
    async def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None: ...

    @abstractmethod
    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool: ...
