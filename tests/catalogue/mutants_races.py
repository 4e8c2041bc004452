"""Racy mutants of multi-record operations: each is the in-memory reference with one
operation split by a round trip (``await asyncio.sleep(0)``) where a real adapter would
need a transaction or a script. Each is correct one call at a time."""

from __future__ import annotations

import asyncio
import uuid

from agentstores.errors import (
    ConflictError,
    ErasedError,
    NotFoundError,
    NotOwnedError,
    StaleWriteError,
)
from agentstores.keys import ConversationKey
from agentstores.memory.data import ConversationRecord, Header, MessageRow
from agentstores.memory.stores import MemoryConversationStore, _stored, _yield
from agentstores.models import StoredMessage
from agentstores.stores import AppendRequest, Cut, OverCap, SweepRule, cut_position
from agentstores.stores.kit import check_tail
from tests.catalogue.mutants import Mutant, _make

MUTANTS: list[Mutant] = []
"""This track's mutants; filled at the bottom."""


class _SteppedErase(MemoryConversationStore):
    """The reference's erase checks, shared by the mutants that break its single step."""

    def _erasable(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> Header | None:
        """The header to erase, or None when the reference would return False."""
        d = self.data
        h = d.header(key)
        if h is None or h.erased_until is not None:
            return None
        if principal is not None and h.owner != principal:
            raise NotOwnedError("only the owner may delete a conversation", key=key)
        if rule is not None:
            conv = d.conversations.get(key)
            if conv is None or not self._matches(key, conv, rule):
                return None
        return h


class EraseStoreByStore(_SteppedErase):
    """Erases one store per round trip and writes the tombstone last: readers see a
    half-erased key, and a write in between lands under no tombstone."""

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        await _yield()
        d = self.data
        h = self._erasable(key, principal, rule)
        if h is None:
            return False
        for store in (d.conversations, d.state, d.recording, d.supervision):
            store.pop(key, None)
            await asyncio.sleep(0)
        for token_key in [t for t in d.tokens if t[0] == key]:
            del d.tokens[token_key]
        h.shared_with.clear()
        h.erased_until = d.now() + d.tombstone_ttl
        return True


class EraseTombstoneLast(_SteppedErase):
    """Removes every record at once, then writes the tombstone one round trip later: an
    append in between recreates the conversation."""

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        await _yield()
        d = self.data
        h = self._erasable(key, principal, rule)
        if h is None:
            return False
        for store in (d.conversations, d.state, d.recording, d.supervision):
            store.pop(key, None)
        for token_key in [t for t in d.tokens if t[0] == key]:
            del d.tokens[token_key]
        await asyncio.sleep(0)
        h.shared_with.clear()
        h.erased_until = d.now() + d.tombstone_ttl
        return True


class TruncateCopiesAcrossAwait(MemoryConversationStore):
    """Reads the transcript, then writes back the kept prefix a round trip later: a
    concurrent append is lost."""

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
            raise NotFoundError(f"no message {message_id!r} in this conversation", key=key)
        kept, removed = conv.messages[:first], len(conv.messages) - first
        await asyncio.sleep(0)
        conv.cut(0)
        for row in kept:
            conv.add(row)
        self._touch(key, principal, conv, epoch)
        return removed


class BranchCopiesAcrossAwait(MemoryConversationStore):
    """Finds the branch point, then copies the source's first rows a round trip later:
    the copy mixes two versions of the source."""

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        await _yield()
        d = self.data
        source = self._readable(key, principal)
        if source is None:
            raise NotFoundError("no such conversation", key=key)
        positions = [i for i, row in enumerate(source.messages) if row.id == message_id]
        if not positions:
            raise NotFoundError(f"no message {message_id!r} in this conversation", key=key)
        if d.header(new_key) is not None:
            raise ConflictError("the branch's key is already in use", key=new_key)
        await asyncio.sleep(0)
        now = d.now()
        copy = ConversationRecord(
            owner=principal, created_at=now, updated_at=now, title=source.title
        )
        for row in source.messages[: positions[0] + 1]:
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


class SweepChecksThenYields(MemoryConversationStore):
    """``erase_if`` checks the rule, then erases a round trip later: a conversation
    touched in between is erased."""

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        if rule is None:
            return await super()._erase(key, principal, rule)
        await _yield()
        conv = self.data.conversations.get(key)
        if self.data.is_erased(key) or conv is None or not self._matches(key, conv, rule):
            return False
        await asyncio.sleep(0)
        if self.data.is_erased(key):
            return False
        self.data.erase(key)
        return True


class OverCapRankedBeforeYield(SweepChecksThenYields):
    """Only the over-cap rule is split: its ranking is a round trip old at the erase."""

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        if isinstance(rule, OverCap):
            return await super()._erase(key, principal, rule)
        return await MemoryConversationStore._erase(self, key, principal, rule)


class AppendBatchInterleaves(MemoryConversationStore):
    """Checks the whole batch, then adds its messages one round trip apart: readers and
    truncates see half a batch."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        await _yield()
        d = self.data
        messages, epoch = request.messages, request.epoch
        if d.is_erased(key):
            raise ErasedError("the conversation was erased", key=key)
        conv = d.conversations.get(key)
        if conv is None and not request.create_if_absent:
            raise NotFoundError("no such conversation", key=key)
        d.check_write(key, principal, epoch)
        fresh = [m for m in messages if conv is None or m.message.id not in conv.ids]
        if messages and not fresh:
            return []
        if request.has_tail_condition:
            tail = conv.tail if conv is not None else None
            if tail != request.expected_tail:
                raise StaleWriteError(f"transcript tail is {tail!r}", key=key, tail=tail)
        now = d.now()
        if conv is None:
            conv = ConversationRecord(owner=principal, created_at=now, updated_at=now)
            d.conversations[key] = conv
        d.commit_write(key, principal, epoch)
        stored: list[StoredMessage] = []
        for i, m in enumerate(fresh):
            if i:
                await asyncio.sleep(0)
            stamp = max(now, conv.messages[-1].created_at) if conv.messages else now
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
        conv.updated_at = max(conv.updated_at, now)
        return stored


class ShareLostUpdate(MemoryConversationStore):
    """Reads the share list and writes it back a round trip later: of two concurrent
    shares one is lost."""

    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        await _yield()
        self._owned(key, principal, None)
        h = self.data.header(key)
        assert h is not None
        members = set(h.shared_with)
        await asyncio.sleep(0)
        members = members | {with_principal} if shared else members - {with_principal}
        h.shared_with.clear()
        h.shared_with.update(members)


erase_store_by_store = _make(conversations=EraseStoreByStore)
erase_tombstone_last = _make(conversations=EraseTombstoneLast)
truncate_copies_across_await = _make(conversations=TruncateCopiesAcrossAwait)
branch_copies_across_await = _make(conversations=BranchCopiesAcrossAwait)
sweep_checks_then_yields = _make(conversations=SweepChecksThenYields)
over_cap_ranked_before_yield = _make(conversations=OverCapRankedBeforeYield)
append_batch_interleaves = _make(conversations=AppendBatchInterleaves)
share_lost_update = _make(conversations=ShareLostUpdate)


def _m(name: str, breaks: str) -> Mutant:
    return Mutant(name, f"{__name__}:{name}", breaks, racy=True)


MUTANTS.extend(
    [
        _m("erase_store_by_store", "races.erasure.writes"),
        _m("erase_tombstone_last", "races.erasure.writes"),
        _m("truncate_copies_across_await", "races.truncate.appends"),
        _m("branch_copies_across_await", "races.branch.source"),
        _m("sweep_checks_then_yields", "races.sweep.touch"),
        _m("over_cap_ranked_before_yield", "races.sweep.touch"),
        _m("append_batch_interleaves", "races.truncate.appends"),
        _m("share_lost_update", "races.sharing.reads"),
    ]
)
