"""The transcript, its metadata, sharing, retention and erasure.

``_get_transcript``, ``_recent``, ``_history`` and ``_tail`` are composed in the ABC from
``_read_messages`` and ``_get_conversation``; override them only to be faster (``_tail``
above all: the metadata and the last rows as one snapshot, read on every turn, is best
one request where the store can answer it in one).
"""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.models import ConversationInfo, LastTurnStatus, Page, StoredMessage
from agentstores.stores import AppendRequest, ConversationStore, Cut, MetadataUpdate, SweepRule

from ._base import TemplateStoreBase


class TemplateConversationStore(TemplateStoreBase, ConversationStore):
    """Keeps the rules in :class:`ConversationStore`'s docstring."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        raise NotImplementedError(
            "ConversationStore steps 1-4, atomically: kit.check_write, present ids -> [], "
            "request.has_tail_condition -> Refusal.STALE_TAIL, append, kit.raised_fence"
        )

    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        raise NotImplementedError(
            "ConversationStore rule set_last_turn_status: kit.check_write; a no-op when absent"
        )

    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        raise NotImplementedError(
            "ConversationStore rule set_title: kit.check_write; Refusal.NOT_FOUND when absent"
        )

    async def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        raise NotImplementedError(
            "ConversationStore rule set_metadata: as set_title, with merge_metadata(current, "
            "updates); keep each value's encoded bytes"
        )

    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        raise NotImplementedError(
            "ConversationStore rule share/unshare: owner only (kit.check_write), NOT_FOUND absent"
        )

    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        raise NotImplementedError(
            "ConversationStore truncate steps, atomically: kit.check_write; expected_tail set "
            "-> kit.check_tail; NOT_FOUND for an unknown id; drop the rows from "
            "cut_position(seq, role, cut) on, the message's own seq and role"
        )

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        raise NotImplementedError(
            "ConversationStore rule branch: copy the prefix to new_key (fresh ids, caller owns "
            "it; kit.can_read on key); Refusal.EXISTS when new_key is taken or erased"
        )

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        raise NotImplementedError(
            "ConversationStore rule delete/erase_if: every store's data for key, leave a "
            "tombstone for ctx.tombstone_ttl; rule set -> only while it still holds"
        )

    async def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        raise NotImplementedError(
            "ConversationStore rule read_messages: seq >= start in order, at most limit; "
            "[] unless kit.can_read"
        )

    async def _get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None:
        raise NotImplementedError(
            "ConversationStore rule get_conversation: the metadata, None unless kit.can_read"
        )

    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        raise NotImplementedError(
            "ConversationStore rule list_conversations: newest first; kit.decode_cursor, "
            "kit.after_cursor, kit.encode_cursor(kit.to_micros(updated_at), session_id)"
        )

    async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        raise NotImplementedError(
            "ConversationStore rule find_sweepable: up to limit keys matching rule on the "
            "store clock"
        )
