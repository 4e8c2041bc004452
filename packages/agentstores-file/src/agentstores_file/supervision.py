"""SupervisionStore on files: the row lives in the key header, so a compare-and-swap is
one locked header replace, and a batch of them is one group commit."""

from __future__ import annotations

import asyncio
import os

from agentstores.errors import (
    AgentStoresError,
    BackendUnavailableError,
    Refusal,
    UnknownOutcomeError,
    refusal_error,
)
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView, Swap, SwapOutcome
from agentstores.stores import SupervisionStore, kit

from ._base import FileStoreBase, off_loop
from .codec import dumps
from .header import LIVE, Head

GROUP_MAX = 128
"""Most keys one group commit holds locked at once (each holds a lock fd and a temp fd
until its group is durable); a bigger batch is split into groups run side by side."""


class FileSupervisionStore(FileStoreBase, SupervisionStore):
    # A batch is a group commit: a few in flight let one group's fsyncs overlap the next
    # group's reads and writes, and beats arriving meanwhile make the next batch.
    max_batches_in_flight = 4

    def _decide(
        self,
        kdir: str,
        key: ConversationKey,
        principal: str,
        expected_epoch: int | None,
        row: SupervisionRow,
    ) -> Head | None:
        """The header one compare-and-swap writes, or None when it loses (the caller holds
        the key's exclusive lock; nothing is written here but an expired key's purge)."""
        root = self.root
        now = root.now_us()
        h, status = root.head(kdir, key, now)
        refusal = root.judge_write(h, status, principal, row.epoch)
        if refusal is Refusal.NOT_OWNED:
            raise refusal_error(refusal, key=key)
        if refusal is not None:  # erased, or fenced: the swap just loses
            return None
        current = h["sup"] if status == LIVE and h is not None else None
        if expected_epoch is None:
            if current is not None:
                return None
        elif current is None or current["e"] != expected_epoch:
            return None
        new = root.claim(kdir, key, h, status, principal)
        new["fence"] = kit.raised_fence(new["fence"], row.epoch)
        new["sup"] = {"s": row.status, "m": row.message_id, "e": row.epoch, "hb": now}
        return new

    def _swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        """One compare-and-swap: one locked header replace (blocking)."""
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=True):
            new = self._decide(kdir, key, principal, expected_epoch, row)
            if new is None:
                return False
            root.put_head(kdir, new)
            return True

    _compare_and_swap = off_loop(_swap)

    async def _compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        if len(swaps) == 1:
            return await self.runner(self._swap_rows, swaps)
        groups = [swaps[i : i + GROUP_MAX] for i in range(0, len(swaps), GROUP_MAX)]
        done = await asyncio.gather(*(self.runner(self._swap_group, g) for g in groups))
        return [outcome for outcomes in done for outcome in outcomes]

    def _swap_rows(self, swaps: list[Swap]) -> list[SwapOutcome]:
        """Each swap through the single path in turn (blocking), its error its outcome."""
        out: list[SwapOutcome] = []
        for sw in swaps:
            try:
                out.append(SwapOutcome(self._swap(sw.key, sw.principal, sw.expected_epoch, sw.row)))
            except Exception as exc:
                out.append(SwapOutcome(False, self._row_error(exc, sw)))
        return out

    def _row_error(self, exc: Exception, sw: Swap) -> AgentStoresError:
        """The typed error a row's failure becomes (anything untyped is a bug: raised)."""
        if isinstance(exc, AgentStoresError):
            return exc
        err = self.translate_error(exc)
        if err is None:
            raise exc
        err.context.setdefault("operation", "supervision.compare_and_swap_many")
        err.context.setdefault("key", sw.key)
        err.__cause__ = exc
        return err

    def _unknown(self, exc: Exception, sw: Swap) -> AgentStoresError:
        """A row whose write may have landed: renamed (or purged) but not known durable."""
        err = UnknownOutcomeError(f"the write may or may not have taken effect: {exc}")
        err.context.setdefault("operation", "supervision.compare_and_swap_many")
        err.context.setdefault("key", sw.key)
        err.__cause__ = exc
        return err

    def _swap_group(self, swaps: list[Swap]) -> list[SwapOutcome]:
        """Every swap of ``swaps`` as one group commit (blocking).

        Each row is still its own compare-and-swap: its key's exclusive lock is taken,
        its header read and judged, and the lock held until its new header is durable.
        What the rows share is the durability barriers (:meth:`FileIO.replace_many`):
        one round of fsyncs for every temp file, one for every directory. Locks are only
        tried, never waited for while others are held (so groups cannot deadlock with
        each other or with multi-key writers); a row whose key is busy runs through the
        single path once the group is done.
        """
        root, io = self.root, self.root.io
        out: list[SwapOutcome | None] = [None] * len(swaps)
        busy: list[int] = []
        held: list[int] = []
        writes: list[tuple[int, str, bytes, bool]] = []  # row, head path, header, purged
        try:
            for i, sw in enumerate(swaps):
                kdir = root.key_dir(sw.key)
                before = io.commits
                try:
                    fd = io.open_lock(root.lock_path(kdir))
                    if fd is None:  # a new key: make its directory, as the single path does
                        io.ensure_dir(kdir)
                        fd = io.open_lock(root.lock_path(kdir))
                        if fd is None:
                            raise BackendUnavailableError(f"cannot create the key directory {kdir}")
                    if not io.try_lock(fd):
                        os.close(fd)
                        busy.append(i)
                        continue
                    held.append(fd)
                    new = self._decide(kdir, sw.key, sw.principal, sw.expected_epoch, sw.row)
                except Exception as exc:
                    out[i] = SwapOutcome(False, self._row_error(exc, sw))
                    continue
                if new is None:
                    out[i] = SwapOutcome(False)
                else:
                    writes.append((i, root.head_path(kdir), dumps(new), io.commits != before))
            results = io.replace_many([(path, data) for _, path, data, _ in writes])
            for (i, _, _, purged), (renamed, failure) in zip(writes, results, strict=True):
                sw = swaps[i]
                if failure is None:
                    out[i] = SwapOutcome(True)
                elif renamed or purged:
                    out[i] = SwapOutcome(False, self._unknown(failure, sw))
                else:
                    out[i] = SwapOutcome(False, self._row_error(failure, sw))
        finally:
            for fd in held:
                os.close(fd)
        if busy:
            for i, outcome in zip(busy, self._swap_rows([swaps[i] for i in busy]), strict=True):
                out[i] = outcome
        return [o if o is not None else SwapOutcome(False) for o in out]

    @off_loop
    def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        root = self.root
        kdir = root.key_dir(key)
        now = root.now_us()
        h, status = root.head(kdir, key, now)
        if not root.can_read(h, status, principal) or h is None:
            return SupervisionView(None, kit.from_micros(now), 0)
        sup = h["sup"]
        row = None
        if sup is not None:
            row = SupervisionRow(
                status=sup["s"],
                message_id=sup["m"],
                epoch=sup["e"],
                heartbeat_at=kit.from_micros(sup["hb"]),
                owner=h["owner"],
            )
        return SupervisionView(row, kit.from_micros(now), int(h["fence"]))

    @off_loop
    def _delete(self, key: ConversationKey, principal: str, message_id: str, epoch: int) -> bool:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            h, status = root.head(kdir, key, root.now_us())
            if status != LIVE or h is None:
                return False
            root.check_write(key, h, status, principal, None)
            sup = h["sup"]
            if sup is None or sup["m"] != message_id or sup["e"] != epoch:
                return False
            h["sup"] = None
            root.put_head(kdir, h)
            return True


__all__ = ["FileSupervisionStore"]
