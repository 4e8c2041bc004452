"""SupervisionStore: the one row per conversation that is its liveness record, mutex and lease."""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..errors import UsageError
from ..keys import ConversationKey, validate_id, validate_principal
from ..models import SupervisionRow, SupervisionView
from ._base import StoreBase, check_epoch, check_key


class SupervisionStore(StoreBase, ABC):
    """Rules every backend keeps (the contract suite checks each):

    - ``compare_and_swap`` writes ``row`` iff (the current row's epoch equals
      ``expected_epoch``) or (no row exists and ``expected_epoch`` is None), **and**
      ``row.epoch`` is not below the key's fence. It stamps ``heartbeat_at`` with the
      store's clock and ``owner`` with the key's owner, raises the key's fence to
      ``row.epoch``, and claims an unowned key for ``principal``. It returns False when
      the condition fails or the key is erased; it raises ``NotOwnedError`` when another
      principal owns the key. Exactly one of many concurrent callers with the same
      expectation gets True.
    - ``read`` returns the row, the store's current time and the key's fence; a
      principal that neither owns the key nor has it shared sees ``(None, now, 0)``.
    - ``delete`` removes the row iff it holds exactly ``message_id`` at ``epoch``; the
      fence is kept.
    """

    async def compare_and_swap(
        self,
        key: ConversationKey,
        principal: str,
        expected_epoch: int | None,
        row: SupervisionRow,
    ) -> bool:
        """Write ``row`` iff the current epoch is ``expected_epoch`` (``None``: no row).

        Also requires ``row.epoch`` not below the key's fence; on success stamps the store
        clock's heartbeat, raises the fence and claims an unowned key.

        Returns:
            True if this call wrote the row; False if the expectation failed, the epoch was
            fenced or the key is erased (nothing changed).

        Raises:
            UsageError: a malformed key, principal, epoch or row.
            NotOwnedError: another principal owns the key.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        expected_epoch = check_epoch(expected_epoch)
        if not isinstance(row, SupervisionRow):
            raise UsageError(f"row must be a SupervisionRow, got {type(row).__name__}")
        async with self.translating_errors("supervision.compare_and_swap", key):
            return await self._compare_and_swap(key, principal, expected_epoch, row)

    async def read(self, key: ConversationKey, principal: str) -> SupervisionView:
        """The row, the store's clock now and the key's fence.

        A principal that neither owns the key nor has it shared sees ``(None, now, 0)``.

        Raises:
            UsageError: a malformed key or principal.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        async with self.translating_errors("supervision.read", key):
            return await self._read(key, principal)

    async def delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        """Remove the row iff it holds exactly ``message_id`` at ``epoch``; the fence stays.

        Returns:
            True if this call removed the row.

        Raises:
            UsageError: a malformed key, principal, message id or epoch.
            NotOwnedError: another principal owns the key.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        validate_id(message_id, "message_id")
        checked = check_epoch(epoch, optional=False)
        async with self.translating_errors("supervision.delete", key):
            return await self._delete(key, principal, message_id, checked)

    @abstractmethod
    async def _compare_and_swap(
        self,
        key: ConversationKey,
        principal: str,
        expected_epoch: int | None,
        row: SupervisionRow,
    ) -> bool: ...

    @abstractmethod
    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView: ...

    @abstractmethod
    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool: ...
