"""The agent state: the checkpoint a resumed turn is revived from (opaque JSON bytes)."""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.stores import AgentStateStore

from ._base import TemplateStoreBase


class TemplateAgentStateStore(TemplateStoreBase, AgentStateStore):
    """Keeps the rules in :class:`AgentStateStore`'s docstring."""

    async def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        raise NotImplementedError("AgentStateStore rule load: the blob, None unless kit.can_read")

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        raise NotImplementedError(
            "AgentStateStore rule save: kit.check_write, replace the blob, kit.raised_fence"
        )

    async def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        raise NotImplementedError(
            "AgentStateStore rule delete: kit.check_write, a no-op when absent"
        )
