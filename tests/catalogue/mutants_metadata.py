"""Broken conversation metadata: each mutant gets one rule of ``set_metadata`` /
``append_messages(metadata=)`` wrong, and the suite must name the promise it breaks."""

from __future__ import annotations

from typing import Any

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.memory.stores import MemoryConversationStore
from agentstores.stores import AppendRequest, MetadataUpdate, merge_metadata
from agentstores.stores.conversation_metadata import MAX_CONVERSATION_METADATA_BYTES
from tests.catalogue.mutants import Mutant, _make


class MetadataReplacedNotMerged(MemoryConversationStore):
    """``set_metadata`` replaces the whole map instead of merging into it."""

    async def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        await super()._set_metadata(key, principal, updates, epoch)
        conv = self.data.conversations[key]
        conv.metadata = {n: v for n, v in updates.items() if v is not None}


class AppendMergesBeforeTailCheck(MemoryConversationStore):
    """The metadata lands before the tail check, so a refused conditional append
    still changes it."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> Any:
        conv = self.data.conversations.get(key)
        if conv is not None and request.metadata is not None and request.has_tail_condition:
            conv.metadata = merge_metadata(conv.metadata, request.metadata)
        return await super()._append_messages(key, principal, request)


class BranchDropsMetadata(MemoryConversationStore):
    """A branch starts with empty metadata."""

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        await super()._branch(key, principal, message_id, new_key)
        self.data.conversations[new_key].metadata = {}


class MetadataLimitOffByOne(MemoryConversationStore):
    """Refuses a map of exactly the limit (``>=`` where ``>`` is meant)."""

    async def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        conv = self._owned(key, principal, epoch)
        merged = merge_metadata(conv.metadata, updates)
        size = sum(len(n.encode()) + len(v) for n, v in merged.items())
        if size >= MAX_CONVERSATION_METADATA_BYTES:
            raise refusal_error(Refusal.NOT_FOUND, "over the limit", key=key)
        await super()._set_metadata(key, principal, updates, epoch)


metadata_replaced_not_merged = _make(conversations=MetadataReplacedNotMerged)
append_merges_before_tail_check = _make(conversations=AppendMergesBeforeTailCheck)
branch_drops_metadata = _make(conversations=BranchDropsMetadata)
metadata_limit_off_by_one = _make(conversations=MetadataLimitOffByOne)


def _m(name: str, breaks: str) -> Mutant:
    return Mutant(name, f"{__name__}:{name}", breaks)


MUTANTS = [
    _m("metadata_replaced_not_merged", "conversations.metadata.merge"),
    _m("append_merges_before_tail_check", "conversations.metadata.append"),
    _m("branch_drops_metadata", "conversations.metadata.lifecycle"),
    _m("metadata_limit_off_by_one", "conversations.metadata.limits"),
]
