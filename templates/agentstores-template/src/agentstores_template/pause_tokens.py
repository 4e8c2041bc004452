"""Pause tokens: single-use continuation tokens bound to a conversation and a principal."""

from __future__ import annotations

from datetime import datetime

from agentstores.keys import ConversationKey
from agentstores.stores import PauseTokenStore

from ._base import TemplateStoreBase


class TemplatePauseTokenStore(TemplateStoreBase, PauseTokenStore):
    """Keeps the rules in :class:`PauseTokenStore`'s docstring."""

    async def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        raise NotImplementedError(
            "PauseTokenStore rule put: kit.check_write, Refusal.EXISTS for a present token id"
        )

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        raise NotImplementedError(
            "PauseTokenStore rule claim: the payload exactly once; Refusal.NOT_FOUND, "
            "EXPIRED (store clock) or ALREADY_CLAIMED through errors.refusal_error"
        )

    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        raise NotImplementedError(
            "PauseTokenStore rule abandon: never claimable again; Refusal.NOT_FOUND as claim"
        )
