"""The supervision row: the conversation's liveness record, mutex and lease."""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView
from agentstores.stores import SupervisionStore

from ._base import TemplateStoreBase


class TemplateSupervisionStore(TemplateStoreBase, SupervisionStore):
    """Keeps the rules in :class:`SupervisionStore`'s docstring."""

    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        raise NotImplementedError(
            "SupervisionStore rule compare_and_swap, atomically: kit.judge_write on the key "
            "header (NOT_OWNED raises, other refusals return False), then the epoch check, "
            "then kit.raised_fence"
        )

    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        raise NotImplementedError(
            "SupervisionStore rule read: (row, store clock, fence); kit.can_read false -> "
            "(None, now, 0)"
        )

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        raise NotImplementedError(
            "SupervisionStore rule delete: remove the row iff it holds message_id at epoch; "
            "keep the fence"
        )
