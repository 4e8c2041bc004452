"""PauseTokenStore: single-use continuation tokens, bound to a conversation and a principal."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime

from ..keys import ConversationKey, validate_id, validate_principal
from ..models import JSON
from ._base import StoreBase, check_datetime, check_epoch, check_key, decode_json, encode_json
from .ambient import write_epoch

MAX_PAYLOAD_BYTES = 1024 * 1024


class PauseTokenStore(StoreBase, ABC):
    """Rules every backend keeps:

    - ``put`` creates a pending token under ``key``: ``ConflictError`` if the token id
      exists there; owner / fence / erasure checks as for every write.
    - ``claim`` returns the payload exactly once across all callers and marks the token
      claimed: ``NotFoundError`` for an unknown token or another key or principal,
      ``ExpiredError`` past ``expires_at`` on the store clock, ``AlreadyClaimedError``
      once claimed or abandoned.
    - ``abandon`` marks the token abandoned: it never becomes claimable again.
      ``NotFoundError`` as for ``claim``.
    Erasing the conversation removes its tokens.
    """

    async def put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload: JSON,
        expires_at: datetime,
        *,
        epoch: int | None = None,
    ) -> None:
        """Create a pending single-use token under ``key`` carrying ``payload``.

        Raises:
            UsageError: a malformed id, key, principal or time, or a payload over 1 MiB.
            ConflictError: the token id already exists under this key.
            FencedError: ``epoch`` is below the key's fence.
            NotOwnedError: another principal owns the key.
            ErasedError: the conversation was erased.
        """
        validate_id(token_id, "token_id")
        key = check_key(key)
        principal = validate_principal(principal)
        raw = encode_json(payload, "pause token payload", MAX_PAYLOAD_BYTES)
        checked = check_datetime(expires_at, "expires_at")
        epoch = write_epoch(key, check_epoch(epoch))
        async with self.translating_errors("pause_tokens.put", key):
            await self._put(token_id, key, principal, raw, checked, epoch)

    async def claim(self, token_id: str, key: ConversationKey, principal: str) -> JSON:
        """The token's payload, exactly once across every caller; marks it claimed.

        Raises:
            UsageError: a malformed id, key or principal.
            NotFoundError: no such token under this key for this principal.
            ExpiredError: ``expires_at`` has passed on the store clock.
            AlreadyClaimedError: the token was claimed or abandoned before.
        """
        validate_id(token_id, "token_id")
        key = check_key(key)
        principal = validate_principal(principal)
        async with self.translating_errors("pause_tokens.claim", key):
            raw = await self._claim(token_id, key, principal)
        return decode_json(raw)

    async def abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        """Mark the token abandoned: it can never be claimed afterwards.

        Raises:
            UsageError: a malformed id, key or principal.
            NotFoundError: no such token under this key for this principal.
        """
        validate_id(token_id, "token_id")
        key = check_key(key)
        principal = validate_principal(principal)
        async with self.translating_errors("pause_tokens.abandon", key):
            await self._abandon(token_id, key, principal)

    @abstractmethod
    async def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None: ...

    @abstractmethod
    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        """Returns the payload bytes stored by ``put``."""

    @abstractmethod
    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None: ...
