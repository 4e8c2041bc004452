"""SupervisionStore on files: the row lives in the key header, so a compare-and-swap is
one locked header replace."""

from __future__ import annotations

import asyncio

from agentstores.errors import AgentStoresError, Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView, Swap, SwapOutcome
from agentstores.stores import SupervisionStore, kit

from ._base import DEFAULT_WORKERS, FileStoreBase, off_loop
from .header import LIVE

BATCH_CHUNKS = 4
"""A batch of swaps runs as up to this many chunks on the pool at once, each chunk's keys
one after another on one thread: one header write (and fsync) per key, with one hop off
the loop per chunk rather than per key."""


class FileSupervisionStore(FileStoreBase, SupervisionStore):
    # A batch is independent fsynced writes, not one round trip: many small batches in
    # flight keep the pool's threads busy without one slow write holding up the rest.
    max_batches_in_flight = 8

    def _swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        """One compare-and-swap: one locked header replace (blocking)."""
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=True):
            now = root.now_us()
            h, status = root.head(kdir, key, now)
            refusal = root.judge_write(h, status, principal, row.epoch)
            if refusal is Refusal.NOT_OWNED:
                raise refusal_error(refusal, key=key)
            if refusal is not None:  # erased, or fenced: the swap just loses
                return False
            current = h["sup"] if status == LIVE and h is not None else None
            if expected_epoch is None:
                if current is not None:
                    return False
            elif current is None or current["e"] != expected_epoch:
                return False
            new = root.claim(kdir, key, h, status, principal)
            new["fence"] = kit.raised_fence(new["fence"], row.epoch)
            new["sup"] = {"s": row.status, "m": row.message_id, "e": row.epoch, "hb": now}
            root.put_head(kdir, new)
            return True

    _compare_and_swap = off_loop(_swap)

    async def _compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        workers = self.runner.workers or DEFAULT_WORKERS
        chunks = max(1, min(BATCH_CHUNKS, workers, len(swaps)))
        parts = [swaps[i::chunks] for i in range(chunks)]
        done = await asyncio.gather(*(self.runner(self._swap_chunk, part) for part in parts))
        by_swap = {
            sw: out
            for part, outs in zip(parts, done, strict=True)
            for sw, out in zip(part, outs, strict=True)
        }
        return [by_swap[sw] for sw in swaps]

    def _swap_chunk(self, swaps: list[Swap]) -> list[SwapOutcome]:
        """Each swap of ``swaps`` in turn (blocking), its typed error kept as its outcome."""
        out: list[SwapOutcome] = []
        for sw in swaps:
            try:
                out.append(SwapOutcome(self._swap(sw.key, sw.principal, sw.expected_epoch, sw.row)))
            except AgentStoresError as exc:
                out.append(SwapOutcome(False, exc))
            except Exception as exc:
                err = self.translate_error(exc)
                if err is None:
                    raise
                err.context.setdefault("operation", "supervision.compare_and_swap_many")
                err.context.setdefault("key", sw.key)
                err.__cause__ = exc
                out.append(SwapOutcome(False, err))
        return out

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
