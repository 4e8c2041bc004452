"""Deliberately broken backends: each is the in-memory reference with ONE promise broken.

Every mutant names the promise it breaks; ``test_kill_rate`` runs the contract suite
against each and requires that it fails, naming that promise. The racy ones are
correct when called one at a time and wrong only under concurrency: they read, yield
to the event loop (a network round trip, in a real adapter), then write.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import agentstores.memory.stores as reference
from agentstores.errors import (
    AlreadyClaimedError,
    ExpiredError,
    FencedError,
    NotOwnedError,
    StaleWriteError,
)
from agentstores.keys import ConversationKey
from agentstores.memory.data import MemoryData, StoredRecord
from agentstores.memory.stores import (
    MemoryAgentStateStore,
    MemoryConversationStore,
    MemoryOAuthStore,
    MemoryPauseTokenStore,
    MemoryRecordingStore,
    MemoryStores,
    MemorySupervisionStore,
)
from agentstores.models import (
    ClientInfo,
    ConversationTail,
    LastTurnStatus,
    Page,
    RecordedEvent,
    StoredMessage,
    SupervisionRow,
    SupervisionView,
    Swap,
    SwapOutcome,
    TranscriptMessage,
    UserIntegration,
)
from agentstores.stores import UNSET, AppendRequest, Cut, EncodedMessage, TranscriptQuery
from agentstores.stores.conversations import MAX_APPEND_BYTES
from agentstores.stores.kit import decode_cursor, encode_cursor
from agentstores_contract import BackendUnderTest
from agentstores_contract.backend import load_object


@dataclass(frozen=True)
class Mutant:
    """A broken backend: ``factory`` is ``"module:callable"`` (importable in a subprocess)."""

    name: str
    factory: str
    breaks: str
    """The promise it breaks; the suite must name it among the failures."""
    racy: bool = False
    """Correct one call at a time; broken only under concurrency."""


async def _noop() -> None:
    return None


@contextmanager
def _atomically() -> Iterator[None]:
    """Run a reference method without its leading yield, so nothing interleaves."""
    original = reference._yield
    reference._yield = _noop
    try:
        yield
    finally:
        reference._yield = original


def _owner(data: MemoryData, key: ConversationKey, principal: str) -> str:
    header = data.header(key)
    return header.owner if header is not None else principal


# --- supervision --------------------------------------------------------------------


class RacyCas(MemorySupervisionStore):
    """Checks the expectation, awaits, then writes: two racers can both win."""

    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        d = self.data
        h = d.header(key)
        if h is not None and h.erased_until is not None:
            return False
        if h is not None and h.owner != principal:
            raise NotOwnedError("another principal owns this conversation", key=key)
        if h is not None and row.epoch < h.fence:
            return False
        current = d.supervision.get(key)
        if (current.epoch if current is not None else None) != expected_epoch:
            return False
        await asyncio.sleep(0)
        h = d.commit_write(key, principal, row.epoch)
        d.supervision[key] = dataclasses.replace(row, heartbeat_at=d.now(), owner=h.owner)
        return True


class CasCreatesFromEpoch(MemorySupervisionStore):
    """The upsert trap: a CAS expecting an epoch creates a missing row."""

    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        if key not in self.data.supervision:
            expected_epoch = None
        return await super()._compare_and_swap(key, principal, expected_epoch, row)


class RacyBatch(MemorySupervisionStore):
    """Checks every row's expectation, awaits, then writes them all: two racing batches
    over the same keys can both win a row."""

    async def _compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        d = self.data
        ok = []
        for sw in swaps:
            current = d.supervision.get(sw.key)
            ok.append((current.epoch if current is not None else None) == sw.expected_epoch)
        await asyncio.sleep(0)
        out = []
        for sw, good in zip(swaps, ok, strict=True):
            h = d.header(sw.key)
            if not good or (
                h is not None and (h.erased_until is not None or sw.row.epoch < h.fence)
            ):
                out.append(SwapOutcome(False))
                continue
            if h is not None and h.owner != sw.principal:
                out.append(SwapOutcome(False, NotOwnedError("not yours", key=sw.key)))
                continue
            h = d.commit_write(sw.key, sw.principal, sw.row.epoch)
            d.supervision[sw.key] = dataclasses.replace(sw.row, heartbeat_at=d.now(), owner=h.owner)
            out.append(SwapOutcome(True))
        return out


class BatchOneOutcome(MemorySupervisionStore):
    """One outcome for the whole batch: every row is told what its first row got."""

    async def _compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        outcomes = await super()._compare_and_swap_many(swaps)
        return [outcomes[0]] * len(outcomes)


class DeleteIgnoresEpoch(MemorySupervisionStore):
    """Removes the row for the right message id whatever epoch it holds."""

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        current = self.data.supervision.get(key)
        if current is not None:
            epoch = current.epoch
        return await super()._delete(key, principal, message_id, epoch)


class TakeoverDoesNotFence(MemorySupervisionStore):
    """Keeps its epoch in the row only: a takeover does not raise the key's fence."""

    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        header = self.data.header(key)
        fence = header.fence if header is not None else 0
        won = await super()._compare_and_swap(key, principal, expected_epoch, row)
        header = self.data.header(key)
        if won and header is not None:
            header.fence = fence
        return won


class CallerClockHeartbeat(MemorySupervisionStore):
    """Stamps heartbeat_at with the caller's clock instead of the store's."""

    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        won = await super()._compare_and_swap(key, principal, expected_epoch, row)
        if won:
            stored = self.data.supervision[key]
            self.data.supervision[key] = dataclasses.replace(stored, heartbeat_at=datetime.now(UTC))
        return won


class ReadSkipsValidation(MemorySupervisionStore):
    """Overrides the template method and so skips the core's id validation."""

    async def read(self, key: ConversationKey, principal: str) -> SupervisionView:
        return await self._read(key, principal)


# --- recording ----------------------------------------------------------------------


class RecordingChecksOnlyItsOwnEpoch(MemoryRecordingStore):
    """Compares the epoch with the stored record's only, not with the key's fence."""

    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        d = self.data
        d.check_write(key, principal, None)
        current = d.recording.get(key)
        if current is not None:
            if event.epoch < current.event.epoch:
                raise FencedError("below the recording's epoch", key=key)
            same_turn = (current.event.message_id, current.event.epoch) == (
                event.message_id,
                event.epoch,
            )
            if same_turn and event.index < current.event.index:
                return False
        d.commit_write(key, principal, event.epoch)
        d.recording[key] = StoredRecord(event, message_json)
        return True


class SilentRecording(MemoryRecordingStore):
    """Stores snapshots but wakes no follower: they see them only at their next poll."""

    def woke(self, key: ConversationKey) -> None:
        return None


class RecordingRollsBack(MemoryRecordingStore):
    """Accepts a late flush with a lower index for the same turn."""

    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        current = self.data.recording.get(key)
        if current is not None and current.event.message_id == event.message_id:
            self.data.recording.pop(key)
        return await super()._put(key, principal, event, message_json)


class LeakyRecordingRead(MemoryRecordingStore):
    """Shows the record to any principal."""

    async def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        return await super()._read(key, _owner(self.data, key, principal))


# --- state --------------------------------------------------------------------------


class StateSaveIgnoresEpoch(MemoryAgentStateStore):
    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        await super()._save(key, principal, blob, None)


class StateNoEpochMeansZero(MemoryAgentStateStore):
    """Treats a save without epoch as epoch 0, so it is fenced."""

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        await super()._save(key, principal, blob, 0 if epoch is None else epoch)


class StateSaveByAnyone(MemoryAgentStateStore):
    """Lets any principal overwrite the owner's state."""

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        await super()._save(key, _owner(self.data, key, principal), blob, epoch)


class StateFenceOfItsOwn(MemoryAgentStateStore):
    """Fences saves with a fence of the state store's own, not the key's."""

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        fences: dict[ConversationKey, int] = self.data.__dict__.setdefault("state_fences", {})
        if epoch is not None and epoch < fences.get(key, 0):
            raise FencedError("below the state's fence", key=key)
        await super()._save(key, principal, blob, None)
        if epoch is not None:
            fences[key] = max(fences.get(key, 0), epoch)


# --- conversations ------------------------------------------------------------------


def _renamed(m: EncodedMessage, new_id: str) -> EncodedMessage:
    return dataclasses.replace(m, message=dataclasses.replace(m.message, id=new_id))


class AppendIgnoresEpoch(MemoryConversationStore):
    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        request = dataclasses.replace(request, epoch=None)
        return await super()._append_messages(key, principal, request)


class AppendNotIdempotent(MemoryConversationStore):
    """Appends a message again when its id is already present (as a copy)."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        conv = self.data.conversations.get(key)
        if conv is not None:
            messages = tuple(
                _renamed(m, m.message.id + "~") if m.message.id in conv.ids else m
                for m in request.messages
            )
            request = dataclasses.replace(request, messages=messages)
        return await super()._append_messages(key, principal, request)


class RacyConditionalAppend(MemoryConversationStore):
    """Checks the tail, awaits, then appends unconditionally."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        messages = request.messages
        conv = self.data.conversations.get(key)
        already = (
            conv is not None and bool(messages) and all(m.message.id in conv.ids for m in messages)
        )
        if request.has_tail_condition and not already:
            tail = conv.tail if conv is not None else None
            if tail != request.expected_tail:
                raise StaleWriteError(f"tail is {tail!r}", key=key)
            await asyncio.sleep(0)
            request = dataclasses.replace(request, expected_tail=UNSET)
        return await super()._append_messages(key, principal, request)


class LostUpdateAppend(MemoryConversationStore):
    """Reads the transcript, awaits, writes it back with the new messages: a concurrent
    append in between is lost."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        conv = self.data.conversations.get(key)
        if conv is None:
            return await super()._append_messages(key, principal, request)
        length = len(conv.messages)
        await asyncio.sleep(0)
        conv.cut(length)
        with _atomically():
            return await super()._append_messages(key, principal, request)


class BatchNotAtomic(MemoryConversationStore):
    """Writes the first message of a batch before finding the tail condition false."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        conv = self.data.conversations.get(key)
        tail = conv.tail if conv is not None else None
        if (
            request.has_tail_condition
            and tail != request.expected_tail
            and len(request.messages) > 1
        ):
            first = dataclasses.replace(request, messages=request.messages[:1], expected_tail=UNSET)
            await super()._append_messages(key, principal, first)
        return await super()._append_messages(key, principal, request)


class CreateIfAbsentIgnored(MemoryConversationStore):
    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        if not self.data.is_erased(key):
            request = dataclasses.replace(request, create_if_absent=True)
        return await super()._append_messages(key, principal, request)


class IndexIgnoresSpeaker(MemoryConversationStore):
    """Indexes the whole transcript even when a speaker is given."""

    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        if query.index is not None:
            query = dataclasses.replace(query, speaker="all")
        return await super()._get_transcript(key, principal, query)


class TruncateKeepsUserMessage(MemoryConversationStore):
    """Off by one: at a user message, keeps it (cut by role)."""

    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        return await super()._truncate(
            key, principal, message_id, epoch, "after" if cut == "by_role" else cut, expected_tail
        )


class TruncateIgnoresCut(MemoryConversationStore):
    """Cuts by role whatever ``cut`` asks."""

    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        return await super()._truncate(key, principal, message_id, epoch, "by_role", expected_tail)


class TruncateIgnoresEpoch(MemoryConversationStore):
    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        return await super()._truncate(key, principal, message_id, None, cut, expected_tail)


class TruncateIgnoresExpectedTail(MemoryConversationStore):
    """Cuts whatever the tail is: ``expected_tail`` is taken and never checked."""

    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        return await super()._truncate(key, principal, message_id, epoch, cut, None)


class TailReadsTwice(MemoryConversationStore):
    """``tail`` as two reads a round trip apart: the metadata, then the rows it names
    (a writer in between gives rows of one state and metadata of another)."""

    async def _tail(
        self, key: ConversationKey, principal: str, limit: int
    ) -> ConversationTail | None:
        info = await self._get_conversation(key, principal)
        if info is None:
            return None
        await asyncio.sleep(0)
        rows = await self._read_messages(key, principal, 0, None)
        return ConversationTail(info, rows[len(rows) - min(limit, len(rows)) :])


class BranchKeepsIds(MemoryConversationStore):
    """Copies the prefix with the source's message ids."""

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        await super()._branch(key, principal, message_id, new_key)
        source, copy = self.data.conversations[key], self.data.conversations[new_key]
        rows = [
            dataclasses.replace(r, id=s.id)
            for r, s in zip(copy.messages, source.messages, strict=False)
        ]
        copy.cut(0)
        for row in rows:
            copy.add(row)


class HistoryFromFirstCompaction(MemoryConversationStore):
    async def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        everything = await super()._read_messages(key, principal, 0, None)
        starts = [m.seq for m in everything if m.compaction]
        return everything[starts[0] :] if starts else everything


class RecentKeepsEveryRole(MemoryConversationStore):
    async def _recent(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        everything = await super()._read_messages(key, principal, 0, None)
        return everything[-limit:]


class LeakyGetConversation(MemoryConversationStore):
    async def _get_conversation(self, key: ConversationKey, principal: str) -> Any:
        return await super()._get_conversation(key, _owner(self.data, key, principal))


class ShareByAnyone(MemoryConversationStore):
    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        await super()._set_shared(key, _owner(self.data, key, principal), with_principal, shared)


class UnshareDoesNothing(MemoryConversationStore):
    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        if shared:
            await super()._set_shared(key, principal, with_principal, shared)
        else:
            self._owned(key, principal, None)


class InclusiveCursor(MemoryConversationStore):
    """Pages from the cursor inclusive: the boundary item shows up twice."""

    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        if cursor is None:
            return await super()._list_conversations(tenant, principal, limit, cursor)
        stamp, session = decode_cursor(cursor)
        nudged = encode_cursor(stamp + 1, session)
        return await super()._list_conversations(tenant, principal, limit, nudged)


class AppendSplitsBigBatches(MemoryConversationStore):
    """Takes a batch over MAX_APPEND_BYTES in two appends of half the messages each, as
    an adapter splitting what is too big for one request would: no append is refused
    for its total size."""

    async def append_messages(
        self, key: ConversationKey, principal: str, messages: Any, **options: Any
    ) -> list[StoredMessage]:
        if len(messages) < 2 or _size(messages) <= MAX_APPEND_BYTES:
            return await super().append_messages(key, principal, messages, **options)
        half = len(messages) // 2
        first = await super().append_messages(key, principal, messages[:half], **options)
        rest = await super().append_messages(key, principal, messages[half:], **options)
        return first + rest


def _size(messages: Any) -> int:
    return sum(len(json.dumps(m.content)) + len(json.dumps(m.metadata)) for m in messages)


class EraseWithoutTombstone(MemoryConversationStore):
    async def _erase(self, key: ConversationKey, principal: str | None, rule: Any) -> bool:
        erased = await super()._erase(key, principal, rule)
        if erased:
            self.data.headers.pop(key, None)
        return erased


class EraseKeepsMetadata(MemoryConversationStore):
    """Erases everything but the conversation's metadata row, which stays listed."""

    async def _erase(self, key: ConversationKey, principal: str | None, rule: Any) -> bool:
        conv = self.data.conversations.get(key)
        erased = await super()._erase(key, principal, rule)
        if erased and conv is not None:
            conv.cut(0)
            self.data.conversations[key] = conv
        return erased


class StatusIgnoresOwner(MemoryConversationStore):
    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        await super()._set_last_turn_status(key, _owner(self.data, key, principal), status, epoch)


# --- pause tokens -------------------------------------------------------------------


class RacyClaim(MemoryPauseTokenStore):
    """Checks the token is pending, awaits, then marks it claimed."""

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        token = self._token(token_id, key, principal)
        if token.status != "pending":
            raise AlreadyClaimedError("already claimed", key=key)
        if token.expires_at <= self.data.now():
            raise ExpiredError("expired", key=key)
        await asyncio.sleep(0)
        token.status = "claimed"
        return token.payload_json


class ExpiryOnCallerClock(MemoryPauseTokenStore):
    """Decides expiry on this machine's clock instead of the store's."""

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        token = self._token(token_id, key, principal)
        if token.status != "pending":
            raise AlreadyClaimedError("already claimed", key=key)
        if token.expires_at <= datetime.now(UTC):
            raise ExpiredError("expired", key=key)
        token.status = "claimed"
        return token.payload_json


class AbandonReclaimable(MemoryPauseTokenStore):
    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        self._token(token_id, key, principal)


class TokenPutIgnoresEpoch(MemoryPauseTokenStore):
    async def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        await super()._put(token_id, key, principal, payload_json, expires_at, None)


# --- OAuth --------------------------------------------------------------------------


class StaleStateIndex(MemoryOAuthStore):
    """Looks pending states up in an index that saves add to but never clean."""

    async def _save_user_integration(self, record: UserIntegration) -> None:
        await super()._save_user_integration(record)
        if record.pending is not None:
            self.data.__dict__.setdefault("state_index", {})[record.pending.state] = record

    async def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        found: UserIntegration | None = self.data.__dict__.get("state_index", {}).get(state)
        return found


class MergedClientInfo(MemoryOAuthStore):
    """Saves client info as a merge into what is stored: an entry the caller left out of
    a registration it saved again survives (a secret rotated away, say)."""

    async def _save_client_info(self, record: ClientInfo) -> None:
        stored = self.data.client_info.get((record.tenant, record.server_name))
        if stored is not None:
            merged = {**dict(stored.client_info), **dict(record.client_info)}
            record = ClientInfo(record.tenant, record.server_name, merged)
        await super()._save_client_info(record)


# --- replicas -----------------------------------------------------------------------


class BundleCachedState(MemoryAgentStateStore):
    """Keeps what this bundle last saved or loaded per key and answers loads from it: one
    replica alone is right, a second replica's saves are never seen."""

    def __init__(self, data: MemoryData) -> None:
        super().__init__(data)
        self._seen: dict[tuple[ConversationKey, str], bytes | None] = {}

    async def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        if (key, principal) not in self._seen:
            self._seen[key, principal] = await super()._load(key, principal)
        return self._seen[key, principal]

    async def _save(self, key: ConversationKey, principal: str, *args: Any, **kw: Any) -> Any:
        out = await super()._save(key, principal, *args, **kw)
        self._seen.pop((key, principal), None)
        return out


# --- keys ---------------------------------------------------------------------------


def _collide(key: Any) -> Any:
    """A naive ``tenant:session`` join split at the first colon: ('a:b','c') is ('a','b:c')."""
    if isinstance(key, tuple):
        return (_collide(key[0]), *key[1:])
    tenant, _, session = f"{key.tenant}:{key.session_id}".partition(":")
    return ConversationKey(tenant, session)


class CollidingDict(dict[Any, Any]):
    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(_collide(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(_collide(key), value)

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(_collide(key))

    def __contains__(self, key: object) -> bool:
        return super().__contains__(_collide(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(_collide(key), default)

    def pop(self, key: Any, *default: Any) -> Any:
        return super().pop(_collide(key), *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        return super().setdefault(_collide(key), default)


# --- bundles ------------------------------------------------------------------------


def _backend(
    *,
    clock: Callable[[], datetime] | None = None,
    data_hook: Callable[[MemoryData], None] | None = None,
    **stores: type,
) -> BackendUnderTest:
    """Fresh memory data, with the given store classes swapped in."""
    url = f"memory://mutant-{uuid.uuid4().hex}"

    def open_(**options: Any) -> MemoryStores:
        bundle = MemoryStores(url, **{"clock": clock, **options})
        if data_hook is not None:
            data_hook(bundle.data)
        for attr, cls in stores.items():
            setattr(bundle, attr, cls(bundle.data))
        return bundle

    return BackendUnderTest(
        open=open_, capabilities=MemoryStores.capabilities, name=url, open_with=open_
    )


def _skewed(hours: float) -> Callable[[], datetime]:
    """A store clock some hours away from this machine's (a database on another host)."""
    return lambda: datetime.now(UTC) + timedelta(hours=hours)


def _colliding(data: MemoryData) -> None:
    for name in ("headers", "supervision", "recording", "state", "conversations", "tokens"):
        current = getattr(data, name)
        if not isinstance(current, CollidingDict):
            setattr(data, name, CollidingDict(current))


def reference_backend() -> BackendUnderTest:
    """The unbroken reference through the same machinery (the control run)."""
    return _backend()


def _make(**stores: type) -> Callable[[], BackendUnderTest]:
    return lambda: _backend(**stores)


racy_cas = _make(supervision=RacyCas)
racy_batch = _make(supervision=RacyBatch)
batch_one_outcome = _make(supervision=BatchOneOutcome)
cas_creates_from_epoch = _make(supervision=CasCreatesFromEpoch)
delete_ignores_epoch = _make(supervision=DeleteIgnoresEpoch)
takeover_does_not_fence = _make(supervision=TakeoverDoesNotFence)
read_skips_validation = _make(supervision=ReadSkipsValidation)
recording_own_epoch_only = _make(recording=RecordingChecksOnlyItsOwnEpoch)
silent_recording = _make(recording=SilentRecording)
recording_rolls_back = _make(recording=RecordingRollsBack)
leaky_recording_read = _make(recording=LeakyRecordingRead)
state_save_ignores_epoch = _make(state=StateSaveIgnoresEpoch)
state_no_epoch_means_zero = _make(state=StateNoEpochMeansZero)
state_save_by_anyone = _make(state=StateSaveByAnyone)
state_fence_of_its_own = _make(state=StateFenceOfItsOwn)
append_ignores_epoch = _make(conversations=AppendIgnoresEpoch)
append_not_idempotent = _make(conversations=AppendNotIdempotent)
racy_conditional_append = _make(conversations=RacyConditionalAppend)
lost_update_append = _make(conversations=LostUpdateAppend)
batch_not_atomic = _make(conversations=BatchNotAtomic)
create_if_absent_ignored = _make(conversations=CreateIfAbsentIgnored)
index_ignores_speaker = _make(conversations=IndexIgnoresSpeaker)
truncate_keeps_user_message = _make(conversations=TruncateKeepsUserMessage)
truncate_ignores_epoch = _make(conversations=TruncateIgnoresEpoch)
truncate_ignores_cut = _make(conversations=TruncateIgnoresCut)
truncate_ignores_expected_tail = _make(conversations=TruncateIgnoresExpectedTail)
tail_reads_twice = _make(conversations=TailReadsTwice)
branch_keeps_ids = _make(conversations=BranchKeepsIds)
history_from_first_compaction = _make(conversations=HistoryFromFirstCompaction)
recent_keeps_every_role = _make(conversations=RecentKeepsEveryRole)
leaky_get_conversation = _make(conversations=LeakyGetConversation)
share_by_anyone = _make(conversations=ShareByAnyone)
unshare_does_nothing = _make(conversations=UnshareDoesNothing)
inclusive_cursor = _make(conversations=InclusiveCursor)
append_splits_big_batches = _make(conversations=AppendSplitsBigBatches)
erase_without_tombstone = _make(conversations=EraseWithoutTombstone)
erase_keeps_metadata = _make(conversations=EraseKeepsMetadata)
status_ignores_owner = _make(conversations=StatusIgnoresOwner)
racy_claim = _make(pause_tokens=RacyClaim)
abandon_reclaimable = _make(pause_tokens=AbandonReclaimable)
token_put_ignores_epoch = _make(pause_tokens=TokenPutIgnoresEpoch)
stale_state_index = _make(oauth=StaleStateIndex)
bundle_cached_state = _make(state=BundleCachedState)
merged_client_info = _make(oauth=MergedClientInfo)


def colliding_keys() -> BackendUnderTest:
    return _backend(data_hook=_colliding)


def caller_clock_heartbeat() -> BackendUnderTest:
    return _backend(clock=_skewed(2), supervision=CallerClockHeartbeat)


def expiry_on_caller_clock() -> BackendUnderTest:
    return _backend(clock=_skewed(-2), pause_tokens=ExpiryOnCallerClock)


def _stores_class_backend(spec: str) -> BackendUnderTest:
    """A broken ``Stores`` class that takes a ``file://`` URL, on a fresh temporary
    directory removed at exit."""
    cls = load_object(spec)
    root = tempfile.mkdtemp(prefix="agentstores-mutant-")
    atexit.register(shutil.rmtree, root, True)
    return BackendUnderTest(
        open=lambda: cls(f"file://{root}"),
        name=f"{spec} on {root}",
        open_with=lambda **options: cls(f"file://{root}", **options),
    )


try:
    from tests.catalogue.file_mutants import MUTANTS as FILE_MUTANTS
except ModuleNotFoundError as exc:
    if exc.name not in ("tests.catalogue.file_mutants", "agentstores_file"):
        raise
    FILE_MUTANTS = {}

FILE_BREAKS = {"data_file_lock": "conversations.append.no_lost_updates"}
"""What each file-backend mutant breaks; others must merely fail somewhere."""

for _name, _spec in FILE_MUTANTS.items():
    globals()[f"file_{_name}"] = partial(_stores_class_backend, _spec)


CONTROL = Mutant("reference", f"{__name__}:reference_backend", "")
"""The unbroken reference, run through the same path: it must pass."""


def _m(name: str, breaks: str, *, racy: bool = False) -> Mutant:
    return Mutant(name, f"{__name__}:{name}", breaks, racy)


MUTANTS: list[Mutant] = [
    _m("racy_cas", "supervision.cas.race", racy=True),
    _m("racy_batch", "supervision.cas_many.race", racy=True),
    _m("batch_one_outcome", "supervision.cas_many.rows"),
    _m("cas_creates_from_epoch", "supervision.cas.create"),
    _m("delete_ignores_epoch", "supervision.delete.guarded"),
    _m("takeover_does_not_fence", "fencing.state.save"),
    _m("read_skips_validation", "keys.validation"),
    _m("recording_own_epoch_only", "fencing.recording.put"),
    _m("silent_recording", "protocol.follow.wakes"),
    _m("recording_rolls_back", "recording.monotonic"),
    _m("leaky_recording_read", "visibility.recording"),
    _m("state_save_ignores_epoch", "fencing.state.save"),
    _m("state_no_epoch_means_zero", "fencing.unfenced"),
    _m("state_save_by_anyone", "ownership.state.save"),
    _m("state_fence_of_its_own", "fencing.cross_store"),
    _m("append_ignores_epoch", "fencing.conversations.append"),
    _m("append_not_idempotent", "conversations.append.idempotent"),
    _m("racy_conditional_append", "conversations.append.race", racy=True),
    _m("lost_update_append", "conversations.append.no_lost_updates", racy=True),
    _m("batch_not_atomic", "conversations.append.batch"),
    _m("create_if_absent_ignored", "conversations.append.create_if_absent"),
    _m("index_ignores_speaker", "transcript.query"),
    _m("truncate_keeps_user_message", "conversations.truncate"),
    _m("truncate_ignores_epoch", "fencing.conversations.truncate"),
    _m("truncate_ignores_cut", "conversations.truncate.cut"),
    _m("truncate_ignores_expected_tail", "conversations.truncate.expected_tail"),
    _m("tail_reads_twice", "conversations.tail.snapshot", racy=True),
    _m("branch_keeps_ids", "conversations.branch"),
    _m("history_from_first_compaction", "conversations.history"),
    _m("recent_keeps_every_role", "conversations.recent"),
    _m("leaky_get_conversation", "visibility.conversations"),
    _m("share_by_anyone", "ownership.conversations.share"),
    _m("unshare_does_nothing", "sharing.read_only"),
    _m("inclusive_cursor", "conversations.list"),
    _m("append_splits_big_batches", "conversations.append.total_size"),
    _m("erase_without_tombstone", "erasure.tombstone"),
    _m("erase_keeps_metadata", "erasure.cascade"),
    _m("status_ignores_owner", "ownership.conversations.set_last_turn_status"),
    _m("racy_claim", "pause_tokens.claim_once", racy=True),
    _m("abandon_reclaimable", "pause_tokens.scoping"),
    _m("token_put_ignores_epoch", "fencing.pause_tokens.put"),
    _m("stale_state_index", "oauth.pending_state"),
    _m("bundle_cached_state", "replicas.visibility"),
    _m("merged_client_info", "upserts.replace"),
    _m("colliding_keys", "keys.isolation"),
    _m("caller_clock_heartbeat", "clock.stamps"),
    _m("expiry_on_caller_clock", "clock.expiry"),
    *(_m(f"file_{n}", FILE_BREAKS.get(n, ""), racy=True) for n in FILE_MUTANTS),
]
