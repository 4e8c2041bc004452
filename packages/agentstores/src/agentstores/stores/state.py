"""AgentStateStore: the checkpoint a resumed turn is revived from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from ..keys import ConversationKey, validate_principal
from ..models import JSON
from ._base import StoreBase, check_epoch, check_key, decode_json, encode_json
from .ambient import write_epoch

MAX_STATE_BYTES = 64 * 1024 * 1024
"""Largest state blob accepted (encoded JSON). Every backend handles at least 8 MiB."""


class AgentStateStore(StoreBase, ABC):
    """Rules every backend keeps:

    - ``load`` returns ``{}`` when nothing is saved or the key is not visible.
    - ``save`` replaces the whole blob; with ``epoch`` it is fenced (``FencedError``
      below the key's fence, which it then raises); ``NotOwnedError`` for another
      principal's key; ``ErasedError`` on an erased key.
    - ``delete`` is a no-op when absent; fenced like ``save``.
    Adapters store and return opaque JSON bytes; this class encodes and decodes them.
    """

    async def load(self, key: ConversationKey, principal: str) -> dict[str, Any]:
        """The saved state, or ``{}`` when nothing is saved or the key is not visible.

        Raises:
            UsageError: a malformed key or principal.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        async with self.translating_errors("state.load", key):
            raw = await self._load(key, principal)
        if raw is None:
            return {}
        value = decode_json(raw)
        return value if isinstance(value, dict) else {}

    async def save(
        self,
        key: ConversationKey,
        principal: str,
        state: Mapping[str, JSON],
        *,
        epoch: int | None = None,
    ) -> None:
        """Replace the whole state; with ``epoch`` the write is fenced and raises the fence.

        Raises:
            UsageError: a malformed key or principal, state that is not a JSON mapping, or
                state over 64 MiB encoded.
            FencedError: ``epoch`` is below the key's fence.
            NotOwnedError: another principal owns the key.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        if not isinstance(state, Mapping):
            raise UsageError(f"state must be a mapping, got {type(state).__name__}")
        blob = encode_json(dict(state), "agent state", MAX_STATE_BYTES)
        epoch = write_epoch(key, check_epoch(epoch))
        async with self.translating_errors("state.save", key):
            await self._save(key, principal, blob, epoch)

    async def delete(
        self, key: ConversationKey, principal: str, *, epoch: int | None = None
    ) -> None:
        """Remove the state (a no-op when absent); fenced like :meth:`save`.

        Raises:
            UsageError: a malformed key, principal or epoch.
            FencedError: ``epoch`` is below the key's fence.
            NotOwnedError: another principal owns the key.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        epoch = write_epoch(key, check_epoch(epoch))
        async with self.translating_errors("state.delete", key):
            await self._delete(key, principal, epoch)

    @abstractmethod
    async def _load(self, key: ConversationKey, principal: str) -> bytes | None: ...

    @abstractmethod
    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None: ...

    @abstractmethod
    async def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None: ...
