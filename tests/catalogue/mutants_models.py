"""Broken backends the strategies and models must reach: normalised ids and principals,
epochs and indexes that lose precision, JSON that does not round-trip exactly, and
metadata side effects (``updated_at``, a branch's header) the old model did not track.

Each is the in-memory reference with one realistic bug that no single-token mutation
produces; each names the promise the suite must blame.
"""

from __future__ import annotations

import dataclasses
import json
import types
import unicodedata
from collections.abc import Callable
from typing import Any

from agentstores.errors import ErasedError, FencedError, NotOwnedError
from agentstores.keys import ConversationKey
from agentstores.memory.data import Header, MemoryData, StoredRecord
from agentstores.memory.stores import (
    MemoryAgentStateStore,
    MemoryConversationStore,
    MemoryRecordingStore,
    MemorySupervisionStore,
)
from agentstores.models import LastTurnStatus, RecordedEvent, SupervisionRow
from agentstores.stores import AppendRequest, Cut
from agentstores_contract import BackendUnderTest
from tests.catalogue.mutants import Mutant, _backend, _make

MUTANTS: list[Mutant] = []
"""This track's mutants; filled at the bottom."""

# --- ids folded before keying -------------------------------------------------------

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))


def _width_fold(session: str) -> str:
    """Full-width ASCII forms to ASCII (what an IME-friendly "cleanup" does)."""
    return "".join(chr(ord(c) - 0xFEE0) if 0xFF01 <= ord(c) <= 0xFF5E else c for c in session)


def _strip_zero_width(session: str) -> str:
    return session.translate(_ZERO_WIDTH) or session


def _trim_spaces(session: str) -> str:
    return session.rstrip(" ") or session


def _folding_dict(fold: Callable[[str], str]) -> type[dict[Any, Any]]:
    """A dict that keys every ``ConversationKey`` (or ``(key, x)`` pair) by a folded id."""

    def folded(key: Any) -> Any:
        if isinstance(key, tuple):
            return (folded(key[0]), *key[1:])
        if isinstance(key, ConversationKey):
            return ConversationKey(key.tenant, fold(key.session_id))
        return key

    class FoldingDict(dict[Any, Any]):
        def __getitem__(self, key: Any) -> Any:
            return super().__getitem__(folded(key))

        def __setitem__(self, key: Any, value: Any) -> None:
            super().__setitem__(folded(key), value)

        def __delitem__(self, key: Any) -> None:
            super().__delitem__(folded(key))

        def __contains__(self, key: object) -> bool:
            return super().__contains__(folded(key))

        def get(self, key: Any, default: Any = None) -> Any:
            return super().get(folded(key), default)

        def pop(self, key: Any, *default: Any) -> Any:
            return super().pop(folded(key), *default)

        def setdefault(self, key: Any, default: Any = None) -> Any:
            return super().setdefault(folded(key), default)

    return FoldingDict


def _folding_backend(fold: Callable[[str], str]) -> BackendUnderTest:
    cls = _folding_dict(fold)

    def hook(data: MemoryData) -> None:
        for name in ("headers", "supervision", "recording", "state", "conversations", "tokens"):
            setattr(data, name, cls(getattr(data, name)))

    return _backend(data_hook=hook)


def ids_width_folded() -> BackendUnderTest:
    return _folding_backend(_width_fold)


def ids_zero_width_stripped() -> BackendUnderTest:
    return _folding_backend(_strip_zero_width)


def ids_trailing_spaces_trimmed() -> BackendUnderTest:
    return _folding_backend(_trim_spaces)


# --- principals compared after normalisation -----------------------------------------


def _principal_hook(fold: Callable[[str], str], *, reads_only: bool = False) -> Any:
    """Header checks that compare ``fold(principal)`` (owner or readers)."""

    def hook(data: MemoryData) -> None:
        def visible(self: MemoryData, key: ConversationKey, principal: str) -> bool:
            h = self.header(key)
            if h is None or h.erased_until is not None:
                return False
            readers = {fold(p) for p in h.shared_with}
            owner = h.owner if reads_only else fold(h.owner)
            return owner == (principal if reads_only else fold(principal)) or (
                fold(principal) in readers
            )

        def check_write(
            self: MemoryData, key: ConversationKey, principal: str, epoch: int | None
        ) -> Header | None:
            h = self.header(key)
            if h is None:
                return None
            if h.erased_until is not None:
                raise ErasedError("the conversation was erased", key=key)
            if fold(h.owner) != fold(principal):
                raise NotOwnedError("another principal owns this conversation", key=key)
            if epoch is not None and epoch < h.fence:
                raise FencedError("stale epoch", key=key, epoch=epoch, fence=h.fence)
            return h

        data.visible = types.MethodType(visible, data)  # type: ignore[method-assign]
        if not reads_only:
            data.check_write = types.MethodType(check_write, data)  # type: ignore[method-assign]

    return hook


def _nfc(value: str) -> str:
    return unicodedata.normalize("NFC", value)


def _nfkc(value: str) -> str:
    return unicodedata.normalize("NFKC", value)


def _principal_backend(fold: Callable[[str], str], *, reads_only: bool = False) -> BackendUnderTest:
    return _backend(
        data_hook=_principal_hook(fold, reads_only=reads_only),
        supervision=_folded_supervision(fold) if not reads_only else MemorySupervisionStore,
    )


def _folded_supervision(fold: Callable[[str], str]) -> type[MemorySupervisionStore]:
    class FoldedSupervision(MemorySupervisionStore):
        async def _compare_and_swap(
            self,
            key: ConversationKey,
            principal: str,
            expected_epoch: int | None,
            row: SupervisionRow,
        ) -> bool:
            h = self.data.header(key)
            if h is not None and fold(h.owner) == fold(principal):
                principal = h.owner
            return await super()._compare_and_swap(key, principal, expected_epoch, row)

    return FoldedSupervision


def principal_nfc() -> BackendUnderTest:
    return _principal_backend(_nfc)


def principal_width_folded() -> BackendUnderTest:
    return _principal_backend(_nfkc)


def shared_with_casefold() -> BackendUnderTest:
    return _principal_backend(str.casefold, reads_only=True)


# --- epochs and indexes that lose precision -------------------------------------------


def _fence_hook(store: Callable[[int], Any]) -> Callable[[MemoryData], None]:
    """``commit_write`` keeps ``store(epoch)`` as the fence instead of the int."""

    def hook(data: MemoryData) -> None:
        original = data.commit_write

        def commit_write(key: ConversationKey, principal: str, epoch: int | None) -> Header:
            h = original(key, principal, epoch)
            if epoch is not None and epoch >= h.fence:
                h.fence = store(epoch)
            return h

        data.commit_write = commit_write  # type: ignore[method-assign]

    return hook


def _int32(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31


def fence_as_float() -> BackendUnderTest:
    return _backend(data_hook=_fence_hook(float))


def fence_int32() -> BackendUnderTest:
    return _backend(data_hook=_fence_hook(_int32))


class RecordingIndexAsDouble(MemoryRecordingStore):
    """Compares epochs and indexes as doubles: a late flush past 2**53 rolls back."""

    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        d = self.data
        d.check_write(key, principal, event.epoch)
        current = d.recording.get(key)
        if current is not None:
            stored = current.event
            if float(event.epoch) < float(stored.epoch):
                raise FencedError("stale epoch", key=key, epoch=event.epoch, fence=stored.epoch)
            same_turn = (stored.message_id, stored.epoch) == (event.message_id, event.epoch)
            if same_turn and float(event.index) < float(stored.index):
                return False
        d.commit_write(key, principal, event.epoch)
        d.recording[key] = StoredRecord(event, message_json)
        return True


class CasEpochAsDouble(MemorySupervisionStore):
    """Matches the expected epoch as doubles: 2**53 + 1 passes for 2**53."""

    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        current = self.data.supervision.get(key)
        if (
            expected_epoch is not None
            and current is not None
            and float(current.epoch) == float(expected_epoch)
        ):
            expected_epoch = current.epoch
        return await super()._compare_and_swap(key, principal, expected_epoch, row)


recording_index_as_double = _make(recording=RecordingIndexAsDouble)
cas_epoch_as_double = _make(supervision=CasEpochAsDouble)


# --- JSON that does not round-trip exactly -------------------------------------------


def _reencode(raw: bytes, **loads: Any) -> bytes:
    value = json.loads(raw, **loads)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _double_int(text: str) -> int | float:
    value = int(text)
    return value if abs(value) <= 2**53 else float(value)


class ContentThroughDoubles(MemoryConversationStore):
    """Stores message content the way a JavaScript service would: big ints become doubles."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> Any:
        messages = tuple(
            dataclasses.replace(m, content_json=_reencode(m.content_json, parse_int=_double_int))
            for m in request.messages
        )
        request = dataclasses.replace(request, messages=messages)
        return await super()._append_messages(key, principal, request)


def _integral_to_int(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_integral_to_int(v) for v in value]
    if isinstance(value, dict):
        return {k: _integral_to_int(v) for k, v in value.items()}
    return value


class StateIntegralFloatsAsInts(MemoryAgentStateStore):
    """Compacts the blob by writing integral floats as ints: 1.0 -> 1, -0.0 -> 0."""

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        value = _integral_to_int(json.loads(blob))
        compact = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
        await super()._save(key, principal, compact, epoch)


class RecordingFloatsRounded(MemoryRecordingStore):
    """Writes snapshot floats with 15 significant digits (printf's ``%.15g``)."""

    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        rounded = _reencode(message_json, parse_float=lambda s: float(f"{float(s):.15g}"))
        return await super()._put(key, principal, event, rounded)


def _nfc_keys(value: Any) -> Any:
    if isinstance(value, list):
        return [_nfc_keys(v) for v in value]
    if isinstance(value, dict):
        return {_nfc(k): _nfc_keys(v) for k, v in value.items()}
    return value


class MetadataKeysNfc(MemoryConversationStore):
    """Normalises metadata keys to NFC: two keys differing only by normalisation merge."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> Any:
        messages = tuple(
            dataclasses.replace(
                m,
                metadata_json=json.dumps(
                    _nfc_keys(json.loads(m.metadata_json)), ensure_ascii=False
                ).encode(),
            )
            for m in request.messages
        )
        request = dataclasses.replace(request, messages=messages)
        return await super()._append_messages(key, principal, request)


content_through_doubles = _make(conversations=ContentThroughDoubles)
state_integral_floats_as_ints = _make(state=StateIntegralFloatsAsInts)
recording_floats_rounded = _make(recording=RecordingFloatsRounded)
metadata_keys_nfc = _make(conversations=MetadataKeysNfc)


# --- updated_at side effects ---------------------------------------------------------


class SetTitleKeepsUpdatedAt(MemoryConversationStore):
    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        conv = self._owned(key, principal, epoch)
        before = conv.updated_at
        await super()._set_title(key, principal, title, epoch)
        conv.updated_at = before


class ShareBumpsUpdatedAt(MemoryConversationStore):
    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        await super()._set_shared(key, principal, with_principal, shared)
        conv = self.data.conversations[key]
        conv.updated_at = max(conv.updated_at, self.data.now())


class StaleAppendBumpsUpdatedAt(MemoryConversationStore):
    """Stamps ``updated_at`` before the tail check, so a refused conditional append
    still reorders the listing."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> Any:
        conv = self.data.conversations.get(key)
        if conv is not None and request.has_tail_condition:
            conv.updated_at = max(conv.updated_at, self.data.now())
        return await super()._append_messages(key, principal, request)


class NoOpAppendBumpsUpdatedAt(MemoryConversationStore):
    """The idempotent re-append returns ``[]`` but still touches the conversation."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> Any:
        stored = await super()._append_messages(key, principal, request)
        conv = self.data.conversations.get(key)
        if request.messages and not stored and conv is not None:
            conv.updated_at = max(conv.updated_at, self.data.now())
        return stored


class BranchCopiesSourceStamps(MemoryConversationStore):
    """The branch copies the source's metadata row, stamps included."""

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        await super()._branch(key, principal, message_id, new_key)
        source, copy = self.data.conversations[key], self.data.conversations[new_key]
        copy.created_at, copy.updated_at = source.created_at, source.updated_at


class TruncateKeepsUpdatedAt(MemoryConversationStore):
    """Treats a truncate as housekeeping, not an edit: ``updated_at`` stays."""

    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        conv = self._owned(key, principal, epoch)
        before = conv.updated_at
        removed = await super()._truncate(key, principal, message_id, epoch, cut, expected_tail)
        conv.updated_at = before
        return removed


class StatusKeepsUpdatedAt(MemoryConversationStore):
    """Treats a turn-status change as bookkeeping, not an edit: ``updated_at`` stays."""

    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        conv = self.data.conversations.get(key)
        before = conv.updated_at if conv is not None else None
        await super()._set_last_turn_status(key, principal, status, epoch)
        if conv is not None and before is not None:
            conv.updated_at = before


class BranchSharesLikeSource(MemoryConversationStore):
    """The branch's header copies the source's, readers included."""

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        await super()._branch(key, principal, message_id, new_key)
        source, copy = self.data.header(key), self.data.header(new_key)
        if source is not None and copy is not None:
            copy.shared_with |= source.shared_with - {principal}
            if principal != source.owner:
                copy.shared_with.add(source.owner)


set_title_keeps_updated_at = _make(conversations=SetTitleKeepsUpdatedAt)
truncate_keeps_updated_at = _make(conversations=TruncateKeepsUpdatedAt)
status_keeps_updated_at = _make(conversations=StatusKeepsUpdatedAt)
branch_shares_like_source = _make(conversations=BranchSharesLikeSource)
share_bumps_updated_at = _make(conversations=ShareBumpsUpdatedAt)
stale_append_bumps_updated_at = _make(conversations=StaleAppendBumpsUpdatedAt)
noop_append_bumps_updated_at = _make(conversations=NoOpAppendBumpsUpdatedAt)
branch_copies_source_stamps = _make(conversations=BranchCopiesSourceStamps)


def _m(name: str, breaks: str) -> Mutant:
    return Mutant(name, f"{__name__}:{name}", breaks)


MUTANTS += [
    _m("ids_width_folded", "keys.isolation"),
    _m("ids_zero_width_stripped", "keys.isolation"),
    _m("ids_trailing_spaces_trimmed", "keys.isolation"),
    _m("principal_nfc", "principals.confusables"),
    _m("principal_width_folded", "principals.confusables"),
    _m("shared_with_casefold", "principals.confusables"),
    _m("fence_as_float", "fencing.large_epochs"),
    _m("fence_int32", "fencing.large_epochs"),
    _m("recording_index_as_double", "fencing.large_epochs"),
    _m("cas_epoch_as_double", "fencing.large_epochs"),
    _m("content_through_doubles", "json.exact"),
    _m("state_integral_floats_as_ints", "json.exact"),
    _m("recording_floats_rounded", "json.exact"),
    _m("metadata_keys_nfc", "json.exact"),
    _m("set_title_keeps_updated_at", "conversations.updated_at"),
    _m("truncate_keeps_updated_at", "conversations.updated_at"),
    _m("status_keeps_updated_at", "conversations.updated_at"),
    _m("share_bumps_updated_at", "conversations.updated_at"),
    _m("stale_append_bumps_updated_at", "conversations.updated_at"),
    _m("noop_append_bumps_updated_at", "conversations.updated_at"),
    _m("branch_copies_source_stamps", "conversations.branch.metadata"),
    _m("branch_shares_like_source", "conversations.branch.metadata"),
]
