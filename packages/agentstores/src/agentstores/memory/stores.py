"""The in-memory reference backend: every store, every rule, in plain Python.

``memory://<name>`` bundles in one process share their data; nothing crosses processes
or survives a restart. Each call is atomic because it mutates state without awaiting
in between (``await _yield()`` only lets other tasks run *before* a call starts).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import os
import sys
import uuid
import warnings
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ..errors import EphemeralStoreWarning, Refusal, UsageError, refusal_error
from ..keys import ConversationKey
from ..models import (
    ClientInfo,
    ConversationInfo,
    ConversationTail,
    LastTurnStatus,
    Page,
    RecordedEvent,
    StoredMessage,
    SupervisionRow,
    SupervisionView,
    TranscriptMessage,
    UserIntegration,
)
from ..stores import (
    AgentStateStore,
    AppendRequest,
    ConversationStore,
    Cut,
    Expired,
    IdleFor,
    MetadataUpdate,
    OAuthStore,
    OverCap,
    PauseTokenStore,
    RecordingStore,
    Stores,
    SupervisionStore,
    SweepRule,
    TranscriptQuery,
    cut_position,
    decode_metadata,
    kit,
    merge_metadata,
)
from ..stores.kit import (
    after_cursor,
    check_recording_put,
    check_tail,
    decode_cursor,
    encode_cursor,
    to_micros,
    url_options,
)
from .data import (
    ConversationRecord,
    MemoryData,
    MessageRow,
    StoredRecord,
    Token,
    forget,
    shared_data,
)
from .plugin import BACKEND

_OPTIONS_HINT = " (clock, tombstone_ttl and fresh are keyword arguments)"

_warned = False
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _ours(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIR) or filename == contextlib.__file__


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside this package (and ``contextlib``), from
    its caller's view, so the warning names the line that opened the bundle, not ours."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and _ours(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def _warn_once() -> None:
    """Warn, once per process and through :mod:`warnings` only (so it prints once; route it
    to logging with :func:`logging.captureWarnings`), that nothing here survives."""
    global _warned
    if _warned:
        return
    _warned = True
    text = (
        "agentstores is running on the IN-MEMORY backend (memory://): transcripts, state, "
        "leases and tokens live only in this process and are LOST on restart; other "
        "replicas cannot see them. Configure a durable backend URL for anything real."
    )
    warnings.warn(text, EphemeralStoreWarning, stacklevel=_caller_level())


async def _yield() -> None:
    await asyncio.sleep(0)


def _stored(row: MessageRow, seq: int) -> StoredMessage:
    return StoredMessage(
        id=row.id,
        role=row.role,
        content=json.loads(row.content_json),
        metadata=json.loads(row.metadata_json),
        compaction=row.compaction,
        seq=seq,
        created_at=row.created_at,
    )


class _Stamps(Sequence[datetime]):
    """``created_at`` of a speaker view, as a sequence ``bisect`` can search."""

    def __init__(self, conv: ConversationRecord, view: Sequence[int]) -> None:
        self.conv, self.view = conv, view

    def __len__(self) -> int:
        return len(self.view)

    def __getitem__(self, i: int) -> datetime:  # type: ignore[override]
        return self.conv.messages[self.view[i]].created_at


class MemoryStoreBase:
    """What every memory store shares: the one ``MemoryData`` of its ``memory://`` name."""

    def __init__(self, data: MemoryData) -> None:
        self.data = data


class MemorySupervisionStore(MemoryStoreBase, SupervisionStore):
    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        await _yield()
        d = self.data
        refusal = d.judge_write(key, principal, row.epoch)
        if refusal is Refusal.NOT_OWNED:
            raise refusal_error(refusal, key=key)
        if refusal is not None:
            return False
        current = d.supervision.get(key)
        if expected_epoch is None:
            if current is not None:
                return False
        elif current is None or current.epoch != expected_epoch:
            return False
        h = d.commit_write(key, principal, row.epoch)
        d.supervision[key] = SupervisionRow(
            status=row.status,
            message_id=row.message_id,
            epoch=row.epoch,
            heartbeat_at=d.now(),
            owner=h.owner,
        )
        return True

    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        await _yield()
        d = self.data
        if not d.visible(key, principal):
            return SupervisionView(None, d.now(), 0)
        h = d.header(key)
        return SupervisionView(d.supervision.get(key), d.now(), h.fence if h else 0)

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        await _yield()
        d = self.data
        if d.header(key) is None or d.is_erased(key):
            return False
        d.check_write(key, principal, None)
        current = d.supervision.get(key)
        if current is None or current.message_id != message_id or current.epoch != epoch:
            return False
        del d.supervision[key]
        return True


class MemoryRecordingStore(MemoryStoreBase, RecordingStore):
    async def _put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message_json: bytes
    ) -> bool:
        await _yield()
        d = self.data
        d.check_write(key, principal, event.epoch)
        current = d.recording.get(key)
        stored = None if current is None else current.event
        mark = None if stored is None else (stored.message_id, stored.epoch, stored.index)
        if not check_recording_put(key, event, mark):
            return False
        d.commit_write(key, principal, event.epoch)
        d.recording[key] = StoredRecord(event, message_json)
        return True

    async def _read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        await _yield()
        d = self.data
        if not d.visible(key, principal):
            return None
        record = d.recording.get(key)
        if record is None:
            return None
        e = record.event
        return RecordedEvent(e.index, json.loads(record.message_json), e.message_id, e.epoch)

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        await _yield()
        d = self.data
        if d.header(key) is None:
            return False
        d.check_write(key, principal, epoch)
        d.commit_write(key, principal, epoch)
        record = d.recording.get(key)
        if record is None or record.event.message_id != message_id:
            return False
        del d.recording[key]
        return True


class MemoryAgentStateStore(MemoryStoreBase, AgentStateStore):
    async def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        await _yield()
        d = self.data
        return d.state.get(key) if d.visible(key, principal) else None

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        await _yield()
        d = self.data
        d.check_write(key, principal, epoch)
        d.commit_write(key, principal, epoch)
        d.state[key] = blob

    async def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        await _yield()
        d = self.data
        if d.header(key) is None:
            return
        d.check_write(key, principal, epoch)
        d.commit_write(key, principal, epoch)
        d.state.pop(key, None)


class MemoryConversationStore(MemoryStoreBase, ConversationStore):
    def _owned(self, key: ConversationKey, principal: str, epoch: int | None) -> ConversationRecord:
        """The conversation for a write by ``principal``: erased, missing, owner, fence."""
        d = self.data
        d.refuse_if_erased(key)
        conv = d.conversations.get(key)
        if conv is None:
            raise refusal_error(Refusal.NOT_FOUND, key=key)
        d.check_write(key, principal, epoch)
        return conv

    def _readable(self, key: ConversationKey, principal: str) -> ConversationRecord | None:
        d = self.data
        return d.conversations.get(key) if d.visible(key, principal) else None

    def _touch(
        self, key: ConversationKey, principal: str, conv: ConversationRecord, epoch: int | None
    ) -> None:
        self.data.commit_write(key, principal, epoch)
        conv.updated_at = max(conv.updated_at, self.data.now())

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        await _yield()
        d = self.data
        epoch = request.epoch
        d.refuse_if_erased(key)
        conv = d.conversations.get(key)
        if conv is None and not request.create_if_absent:
            raise refusal_error(Refusal.NOT_FOUND, key=key)
        d.check_write(key, principal, epoch)
        messages = request.messages
        fresh = [m for m in messages if conv is None or m.message.id not in conv.ids]
        if messages and not fresh:
            return []
        if request.has_tail_condition:
            tail = conv.tail if conv is not None else None
            if tail != request.expected_tail:
                raise refusal_error(
                    Refusal.STALE_TAIL, key=key, tail=tail, expected=request.expected_tail
                )
        merged = None
        if request.metadata is not None:
            merged = merge_metadata(conv.metadata if conv else {}, request.metadata)
        now = d.now()
        if conv is None:
            conv = ConversationRecord(owner=principal, created_at=now, updated_at=now)
            d.conversations[key] = conv
        d.commit_write(key, principal, epoch)
        stamp = max(now, conv.messages[-1].created_at) if conv.messages else now
        stored: list[StoredMessage] = []
        for m in fresh:
            row = MessageRow(
                m.message.id,
                m.message.role,
                m.content_json,
                m.metadata_json,
                m.message.compaction,
                stamp,
            )
            stored.append(_stored(row, conv.add(row)))
        if request.last_turn_status is not None:
            conv.last_turn_status = request.last_turn_status
        if request.title is not None:
            conv.title = request.title
        if request.expires_at is not None:
            conv.expires_at = request.expires_at
        if merged is not None:
            conv.metadata = merged
        conv.updated_at = max(conv.updated_at, now)
        return stored

    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        await _yield()
        d = self.data
        conv = d.conversations.get(key)
        if conv is None or d.is_erased(key):
            return
        d.check_write(key, principal, epoch)
        conv.last_turn_status = status
        self._touch(key, principal, conv, epoch)

    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        await _yield()
        conv = self._owned(key, principal, epoch)
        conv.title = title
        self._touch(key, principal, conv, epoch)

    async def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        await _yield()
        conv = self._owned(key, principal, epoch)
        conv.metadata = merge_metadata(conv.metadata, updates)
        self._touch(key, principal, conv, epoch)

    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        await _yield()
        conv = self._owned(key, principal, None)
        h = self.data.header(key)
        assert h is not None
        if shared:
            h.shared_with.add(with_principal)
        else:
            h.shared_with.discard(with_principal)
        del conv

    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        await _yield()
        conv = self._owned(key, principal, epoch)
        if expected_tail is not None:
            check_tail(key, conv.tail, expected_tail)
        for position, row in enumerate(conv.messages):
            if row.id == message_id:
                first = cut_position(position, row.role, cut)
                break
        else:
            raise refusal_error(
                Refusal.NOT_FOUND, f"no message {message_id!r} in this conversation", key=key
            )
        removed = conv.cut(first)
        self._touch(key, principal, conv, epoch)
        return len(removed)

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        await _yield()
        d = self.data
        source = self._readable(key, principal)
        if source is None:
            raise refusal_error(Refusal.NOT_FOUND, key=key)
        for position, row in enumerate(source.messages):
            if row.id == message_id:
                prefix = source.messages[: position + 1]
                break
        else:
            raise refusal_error(
                Refusal.NOT_FOUND, f"no message {message_id!r} in this conversation", key=key
            )
        if d.header(new_key) is not None:
            raise refusal_error(Refusal.EXISTS, "the branch's key is already in use", key=new_key)
        now = d.now()
        copy = ConversationRecord(
            owner=principal,
            created_at=now,
            updated_at=now,
            title=source.title,
            metadata=dict(source.metadata),
        )
        for row in prefix:
            copy.add(
                MessageRow(
                    uuid.uuid4().hex,
                    row.role,
                    row.content_json,
                    row.metadata_json,
                    row.compaction,
                    now,
                )
            )
        d.commit_write(new_key, principal, None)
        d.conversations[new_key] = copy

    def _matches(self, key: ConversationKey, conv: ConversationRecord, rule: SweepRule) -> bool:
        now = self.data.now()
        if isinstance(rule, Expired):
            return conv.expires_at is not None and conv.expires_at <= now
        if isinstance(rule, IdleFor):
            return conv.updated_at < now - rule.duration
        assert isinstance(rule, OverCap)
        ranked = sorted(
            (
                (c.updated_at, k.session_id)
                for k, c in self.data.conversations.items()
                if k.tenant == key.tenant and c.owner == conv.owner
            ),
            reverse=True,
        )
        return ranked.index((conv.updated_at, key.session_id)) >= rule.keep

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        await _yield()
        d = self.data
        h = d.header(key)
        if h is None or h.erased:
            return False
        if principal is not None and h.owner != principal:
            raise refusal_error(
                Refusal.NOT_OWNED, "only the owner may delete a conversation", key=key
            )
        if rule is not None:
            conv = d.conversations.get(key)
            if conv is None or not self._matches(key, conv, rule):
                return False
        d.erase(key)
        return True

    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        await _yield()
        conv = self._readable(key, principal)
        if conv is None:
            return []
        if query.speaker == "all":
            view: Sequence[int] = range(len(conv.messages))
        else:
            view = conv.positions[query.speaker]
        if query.index is not None:
            i = query.index + len(view) if query.index < 0 else query.index
            chosen = [i] if 0 <= i < len(view) else []
        elif query.time_range is not None:
            start, end = query.time_range
            stamps = _Stamps(conv, view)
            chosen = list(
                range(bisect.bisect_left(stamps, start), bisect.bisect_right(stamps, end))
            )
        else:
            chosen = list(range(len(view)))
        if query.limit is not None:
            chosen = chosen[: query.limit]
        rows = [(i, conv.messages[view[i]]) for i in chosen]
        return [
            TranscriptMessage(i, row.role, json.loads(row.content_json), row.id, row.created_at)
            for i, row in rows
        ]

    async def _recent(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        await _yield()
        conv = self._readable(key, principal)
        if conv is None:
            return []
        return [_stored(conv.messages[seq], seq) for seq in conv.positions["turns"][-limit:]]

    async def _tail(
        self, key: ConversationKey, principal: str, limit: int
    ) -> ConversationTail | None:
        await _yield()
        conv = self._readable(key, principal)
        if conv is None:
            return None
        count = len(conv.messages)
        start = max(0, count - limit)
        rows = [_stored(conv.messages[s], s) for s in range(start, count)]
        return ConversationTail(self._info(key, conv), rows)

    async def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        await _yield()
        conv = self._readable(key, principal)
        if conv is None:
            return []
        start = 0
        for seq, row in enumerate(conv.messages):
            if row.compaction:
                start = seq
        return [_stored(row, seq) for seq, row in enumerate(conv.messages) if seq >= start]

    async def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        await _yield()
        conv = self._readable(key, principal)
        if conv is None:
            return []
        end = len(conv.messages) if limit is None else start + limit
        return [_stored(conv.messages[s], s) for s in range(start, min(end, len(conv.messages)))]

    def _info(self, key: ConversationKey, conv: ConversationRecord) -> ConversationInfo:
        h = self.data.header(key)
        return ConversationInfo(
            key=key,
            owner=conv.owner,
            title=conv.title,
            created_at=conv.created_at,
            updated_at=conv.updated_at,
            expires_at=conv.expires_at,
            last_turn_status=conv.last_turn_status,
            tail_message_id=conv.tail,
            message_count=len(conv.messages),
            shared_with=frozenset(h.shared_with) if h else frozenset(),
            metadata=decode_metadata(conv.metadata),
        )

    async def _get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None:
        await _yield()
        conv = self._readable(key, principal)
        return None if conv is None else self._info(key, conv)

    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        await _yield()
        after = decode_cursor(cursor) if cursor is not None else None
        mine = sorted(
            (
                (to_micros(conv.updated_at), key.session_id, key, conv)
                for key, conv in self.data.conversations.items()
                if key.tenant == tenant and conv.owner == principal
            ),
            key=lambda item: (item[0], item[1]),
            reverse=True,
        )
        mine = [item for item in mine if after_cursor(item[0], item[1], after)]
        page = mine[:limit]
        items = [self._info(key, conv) for _, _, key, conv in page]
        next_cursor = None
        if len(mine) > limit and page:
            next_cursor = encode_cursor(page[-1][0], page[-1][1])
        return Page(items, next_cursor)

    async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        await _yield()
        found = [
            key
            for key, conv in sorted(
                self.data.conversations.items(), key=lambda kv: (kv[1].updated_at, kv[0].session_id)
            )
            if self._matches(key, conv, rule)
        ]
        return found[:limit]


class MemoryPauseTokenStore(MemoryStoreBase, PauseTokenStore):
    async def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        await _yield()
        d = self.data
        d.check_write(key, principal, epoch)
        if (key, token_id) in d.tokens:
            raise refusal_error(Refusal.EXISTS, f"pause token {token_id!r} already exists", key=key)
        d.commit_write(key, principal, epoch)
        d.tokens[(key, token_id)] = Token(principal, payload_json, expires_at)

    def _token(self, token_id: str, key: ConversationKey, principal: str) -> Token:
        d = self.data
        h = d.header(key)
        token = d.tokens.get((key, token_id))
        if h is None or h.erased or h.owner != principal or token is None:
            raise refusal_error(Refusal.NOT_FOUND, "no such pause token", key=key)
        return token

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        await _yield()
        token = self._token(token_id, key, principal)
        if token.status != "pending":
            raise refusal_error(
                Refusal.ALREADY_CLAIMED, f"pause token {token_id!r} is {token.status}", key=key
            )
        if token.expires_at <= self.data.now():
            raise refusal_error(Refusal.EXPIRED, f"pause token {token_id!r} expired", key=key)
        token.status = "claimed"
        return token.payload_json

    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        await _yield()
        self._token(token_id, key, principal).status = "abandoned"


class MemoryOAuthStore(MemoryStoreBase, OAuthStore):
    async def _list_user_integrations(
        self, tenant: str, user: str, server_names: list[str] | None
    ) -> list[UserIntegration]:
        await _yield()
        found = [
            r
            for (t, u, s), r in self.data.integrations.items()
            if t == tenant and u == user and (server_names is None or s in server_names)
        ]
        return sorted(found, key=lambda r: r.server_name)

    async def _get_user_integration(
        self, tenant: str, user: str, server_name: str
    ) -> UserIntegration | None:
        await _yield()
        return self.data.integrations.get((tenant, user, server_name))

    async def _find_by_pending_state(self, state: str) -> UserIntegration | None:
        await _yield()
        for record in self.data.integrations.values():
            if record.pending is not None and record.pending.state == state:
                return record
        return None

    async def _save_user_integration(self, record: UserIntegration) -> None:
        await _yield()
        self.data.integrations[(record.tenant, record.user, record.server_name)] = record

    async def _delete_user_integration(self, tenant: str, user: str, server_name: str) -> bool:
        await _yield()
        return self.data.integrations.pop((tenant, user, server_name), None) is not None

    async def _list_client_info(
        self, tenant: str, server_names: list[str] | None
    ) -> list[ClientInfo]:
        await _yield()
        found = [
            r
            for (t, s), r in self.data.client_info.items()
            if t == tenant and (server_names is None or s in server_names)
        ]
        return sorted(found, key=lambda r: r.server_name)

    async def _get_client_info(self, tenant: str, server_name: str) -> ClientInfo | None:
        await _yield()
        return self.data.client_info.get((tenant, server_name))

    async def _save_client_info(self, record: ClientInfo) -> None:
        await _yield()
        self.data.client_info[(record.tenant, record.server_name)] = record


class MemoryStores(Stores):
    """``memory://[name]``: bundles with the same name in one process share data.

    Options: ``clock`` (a callable returning an aware datetime; the store clock),
    ``tombstone_ttl`` (timedelta, default 30 days, at most 100 years), ``fresh=True`` to
    start empty.
    ``clock`` and ``tombstone_ttl`` are this bundle's own: bundles of one name share the
    records, each with its own options.
    """

    backend = "memory"
    capabilities = BACKEND.capabilities

    def __init__(
        self,
        url: str = "memory://",
        *,
        clock: Callable[[], datetime] | None = None,
        tombstone_ttl: timedelta | None = None,
        fresh: bool = False,
    ) -> None:
        if not url.startswith("memory://"):
            raise UsageError(f"not a memory:// URL: {url!r}")
        url_options(url, (), backend="memory", hint=_OPTIONS_HINT)
        ttl = kit.tombstone_ttl(tombstone_ttl)  # the kit's rule: positive, at most 100 years
        self.name = url[len("memory://") :].split("?", 1)[0] or "default"
        if fresh:
            forget(self.name)
        shared = shared_data(self.name)
        self.data = shared.with_options(clock=clock, tombstone_ttl=ttl)
        self._wakeups = self.data.wakeups
        self.supervision = MemorySupervisionStore(self.data)
        self.recording = MemoryRecordingStore(self.data)
        self.state = MemoryAgentStateStore(self.data)
        self.conversations = MemoryConversationStore(self.data)
        self.pause_tokens = MemoryPauseTokenStore(self.data)
        self.oauth = MemoryOAuthStore(self.data)

    async def now(self) -> datetime:
        """The bundle's store clock (``clock=`` when given, else this machine's UTC)."""
        return self.data.now()

    async def _open(self) -> None:
        _warn_once()


__all__ = ["EphemeralStoreWarning", "MemoryStores", "Token"]
