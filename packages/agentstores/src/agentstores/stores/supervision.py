"""SupervisionStore: the one row per conversation that is its liveness record, mutex and lease."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence

from ..errors import AgentStoresError, UsageError
from ..keys import ConversationKey, validate_id, validate_principal
from ..models import SupervisionRow, SupervisionView, Swap, SwapOutcome
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
    - ``compare_and_swap_many`` does many such swaps in one call (one round trip where
      the backend allows): each row is its own compare-and-swap, linearizable on its
      own, with its own outcome; rows of one batch are not atomic together.
    - ``read`` returns the row, the store's current time and the key's fence; a
      principal that neither owns the key nor has it shared sees ``(None, now, 0)``.
    - ``delete`` removes the row iff it holds exactly ``message_id`` at ``epoch``; the
      fence is kept.
    """

    max_batches_in_flight: int = 2
    """How many ``compare_and_swap_many`` calls the heartbeat coalescer keeps in flight on
    this store at once: a few where a batch is one round trip (beats arriving meanwhile
    make the next batch), more where a batch is many independent writes."""

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
        # Through translating_errors, never spelled out: an adapter's edge may do more
        # than translate (MongoDB's raises again a cancellation its driver swallowed).
        async with self.translating_errors("supervision.compare_and_swap", key):
            swapped = await self._compare_and_swap(key, principal, expected_epoch, row)
        if swapped:  # a claim, takeover, seal: followers read again (heartbeats do not wake)
            self.woke(key)
        return swapped

    async def compare_and_swap_many(self, swaps: Sequence[Swap]) -> list[SwapOutcome]:
        """Do every swap of ``swaps``, each its own :meth:`compare_and_swap`, in one call.

        Meant for heartbeats: a process holding many leases refreshes them together
        (one SQL statement, one pipeline) instead of one round trip each. Rows are not
        atomic together; each succeeds, fails or errs on its own, and a failure of the
        whole call (a lost connection) becomes every affected row's ``error``.

        Returns:
            One :class:`SwapOutcome` per swap, in order: ``swapped`` as the single call
            would return it, or the typed ``error`` it would raise (``NotOwnedError``,
            ``UnknownOutcomeError``, ...).

        Raises:
            UsageError: a malformed swap (nothing is attempted), or one key twice.
        """
        checked = check_swaps(swaps)
        if not checked:
            return []
        try:
            async with self.translating_errors("supervision.compare_and_swap_many"):
                outcomes = await self._compare_and_swap_many(checked)
        except AgentStoresError as exc:
            return [SwapOutcome(False, exc)] * len(checked)
        if len(outcomes) != len(checked):
            raise AssertionError(f"{len(outcomes)} outcomes for {len(checked)} swaps")
        return outcomes

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
            removed = await self._delete(key, principal, message_id, checked)
        if removed:
            self.woke(key)
        return removed

    @abstractmethod
    async def _compare_and_swap(
        self,
        key: ConversationKey,
        principal: str,
        expected_epoch: int | None,
        row: SupervisionRow,
    ) -> bool: ...

    async def _compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        """The swaps, checked. Default: every single swap at once, concurrently; adapters
        with a cheaper batch (one statement, one pipeline) override it."""
        return list(await asyncio.gather(*(self._one_swap(swap) for swap in swaps)))

    async def _one_swap(self, swap: Swap) -> SwapOutcome:
        """One checked swap through the single path, its typed error kept as the outcome."""
        try:
            async with self.translating_errors("supervision.compare_and_swap", swap.key):
                ok = await self._compare_and_swap(
                    swap.key, swap.principal, swap.expected_epoch, swap.row
                )
        except AgentStoresError as exc:
            return SwapOutcome(False, exc)
        return SwapOutcome(ok)

    @abstractmethod
    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView: ...

    @abstractmethod
    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool: ...


def check_swaps(swaps: object) -> list[Swap]:
    """``swaps`` as a list of well-formed :class:`Swap`, each key once; UsageError else."""
    if isinstance(swaps, (str, bytes)) or not isinstance(swaps, Sequence):
        raise UsageError(f"swaps must be a sequence of Swap, got {type(swaps).__name__}")
    out: list[Swap] = []
    seen: set[ConversationKey] = set()
    for swap in swaps:
        if not isinstance(swap, Swap):
            raise UsageError(f"each swap must be a Swap, got {type(swap).__name__}")
        key = check_key(swap.key)
        principal = validate_principal(swap.principal)
        expected = check_epoch(swap.expected_epoch)
        if not isinstance(swap.row, SupervisionRow):
            raise UsageError(f"row must be a SupervisionRow, got {type(swap.row).__name__}")
        if key in seen:
            raise UsageError(f"key {key!r} appears twice in one compare_and_swap_many")
        seen.add(key)
        if principal is not swap.principal or expected is not swap.expected_epoch:
            swap = Swap(key, principal, expected, swap.row)
        out.append(swap)
    return out
