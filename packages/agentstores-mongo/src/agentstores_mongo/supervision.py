"""The supervision row: the ``sup`` entry of the key's header, its heartbeat stamped by
the server (``$currentDate``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView, Swap, SwapOutcome
from agentstores.stores import SupervisionStore, kit

from ._base import MongoStoreBase, aware, resent
from .errors import LostReply, is_connection_error, maybe_sent
from .header import (
    RETRY,
    Header,
    Retry,
    commit,
    ensure_header,
    fence_of,
    read_with_clock,
    row_of,
    row_value,
    swap_token,
    write,
)


def in_place(
    key: ConversationKey, principal: str, expected_epoch: int, row: SupervisionRow, nonce: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The filter and update of the in-place CAS (see ``_swap_in_place``).

    Every path an update sets costs the server a rewrite of it, so only what the swap
    changes is written: the row with the writer nonce inside it (one string, one path
    for both: see ``header.row_value``), the heartbeat, and ``sw`` only when the token
    changes (a takeover or a finished row; a heartbeat leaves it as it is). The fence
    follows the row's epoch (see ``header.fence_of``), and ``rev`` is left alone: every
    commit filters on ``sw`` too (see ``header.commit``)."""
    expected = swap_token(expected_epoch, principal)
    token = swap_token(row.epoch, principal) if row.status == "running" else None
    changes: dict[str, Any] = {
        "sup": row_value(row.status, row.message_id, row.epoch, nonce),
    }
    if token != expected:
        changes["sw"] = token
    update = {"$set": changes, "$currentDate": {"hb": True}}
    return {"_id": key.storage_name, "sw": expected}, update


def is_beat(swap: Swap) -> bool:
    """A heartbeat: the running row written again at its own epoch (writing it twice
    writes the same row, so a batch whose outcome is unclear can be done again)."""
    return swap.expected_epoch == swap.row.epoch and swap.row.status == "running"


class MongoSupervisionStore(MongoStoreBase, SupervisionStore):
    async def _compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        """Heartbeats in one round trip: an unordered bulk of in-place CASes. When all
        matched, every beat landed; otherwise (or on any error) the beats go again one by
        one through the single path, which is harmless for the ones that did land (a
        heartbeat writes the same row again). Other swaps take the single path."""
        beats = [i for i, swap in enumerate(swaps) if is_beat(swap)]
        if len(beats) < 2:
            return await super()._compare_and_swap_many(swaps)
        from pymongo import UpdateOne

        ops = []
        for i in beats:
            swap = swaps[i]
            assert swap.expected_epoch is not None
            where, update = in_place(
                swap.key, swap.principal, swap.expected_epoch, swap.row, kit.writer_nonce_hex()
            )
            ops.append(UpdateOne(where, update))
        landed = False
        with contextlib.suppress(Exception):
            result = await self.ctx.keys.bulk_write(ops, ordered=False)
            landed = result.matched_count == len(beats)
        outcomes: list[SwapOutcome | None] = [None] * len(swaps)
        if landed:
            for i in beats:
                outcomes[i] = SwapOutcome(True)
        rest = [i for i, outcome in enumerate(outcomes) if outcome is None]
        singles = await asyncio.gather(*(self._one_swap(swaps[i]) for i in rest))
        for i, outcome in zip(rest, singles, strict=True):
            outcomes[i] = outcome
        return [outcome for outcome in outcomes if outcome is not None]

    async def _swap_in_place(
        self, key: ConversationKey, principal: str, expected_epoch: int, row: SupervisionRow
    ) -> bool:
        """The common CAS (a heartbeat or takeover on a live key of ``principal``'s) in one
        round trip, filtered on the header's swap token alone: ``sw`` names the row's
        epoch and owner only while the key-header rule's passing case holds (not erased,
        nothing left to finish, the row ``running``, the fence at its epoch), and
        ``row.epoch`` not below ``expected_epoch`` keeps it at or above the fence. A
        heartbeat whose reply was lost can never land after the seal (a sealed row has no
        token). False means "not that case": the general path decides."""
        if row.epoch < expected_epoch:
            return False
        nonce = kit.writer_nonce_hex()
        where, update = in_place(key, principal, expected_epoch, row, nonce)
        try:
            result = await self.ctx.keys.update_one(where, update)
        except Exception as exc:
            if not maybe_sent(exc):
                raise
            return await self._settle(key, expected_epoch, row, nonce, exc)
        return bool(result.matched_count == 1)

    async def _settle(
        self,
        key: ConversationKey,
        expected_epoch: int,
        row: SupervisionRow,
        nonce: str,
        cause: BaseException,
    ) -> bool:
        """Whether an in-place swap whose reply was lost landed. True when the header's
        row still carries its nonce (``w``). False ("let the general path decide",
        which re-reads and swaps again through the header CAS) when re-applying it is
        harmless: a heartbeat of the same epoch writes the same row, and a fence still
        below ``row.epoch`` shows a takeover did not land (once the general path has
        swapped or refused, the lost update's filter can never match again). Otherwise
        raises ``LostReply``."""
        deadline = time.monotonic() + self.ctx.reconcile_window
        while True:
            try:
                doc = await self.ctx.keys.find_one({"_id": key.storage_name}, {"sup": 1, "f": 1})
                break
            except Exception as exc:
                if not is_connection_error(exc) or time.monotonic() > deadline:
                    raise LostReply(f"{cause}; reading back failed too: {exc}") from exc
                await asyncio.sleep(0.1)
        if doc is not None and (row_of(doc) or {}).get("w") == nonce:
            return True
        if expected_epoch == row.epoch or doc is None or fence_of(doc) < row.epoch:
            return False
        raise LostReply(f"{cause}; the swap's nonce is not in the header") from cause

    @resent
    async def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        ctx = self.ctx
        if expected_epoch is not None and await self._swap_in_place(
            key, principal, expected_epoch, row
        ):
            return True

        async def attempt(h: Header) -> bool | Retry:
            refusal = h.judge(principal, row.epoch)
            if refusal is Refusal.NOT_OWNED:
                raise refusal_error(refusal, key=key)
            if refusal is not None:  # erased, or fenced: the swap just loses
                return False
            current = h.row
            if expected_epoch is None:
                if current is not None:
                    return False
            elif current is None or current["e"] != expected_epoch:
                return False
            if h.doc is None:
                await ensure_header(ctx, key)
                return RETRY
            fields, _ = h.claim(principal)
            fields["f"] = kit.raised_fence(h.fence, row.epoch)
            fields["sup"] = row_value(row.status, row.message_id, row.epoch)
            return True if await commit(ctx, h, fields, stamps=("hb",)) else RETRY

        return await write(ctx, key, attempt)

    @resent
    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        h, now = await read_with_clock(self.ctx, key)
        if not h.can_read(principal):
            return SupervisionView(None, now, 0)
        sup = h.row
        row = None
        if sup is not None:
            row = SupervisionRow(
                status=sup["s"],
                message_id=sup["m"],
                epoch=sup["e"],
                heartbeat_at=aware(h.get("hb")),
                owner=h.owner or "",
            )
        return SupervisionView(row, now, h.fence)

    @resent
    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        ctx = self.ctx

        async def attempt(h: Header) -> bool | Retry:
            if h.live is None:
                return False
            h.check_write(principal, None)
            sup = h.row
            if sup is None or sup["m"] != message_id or sup["e"] != epoch:
                return False
            # a heartbeat may rewrite the row in place between read and commit
            expect = {"sup": h.get("sup")}
            fields = {"sup": None, "f": h.fence}  # the row's epoch stays the fence
            return True if await commit(ctx, h, fields, expect=expect) else RETRY

        return await write(ctx, key, attempt)


__all__ = ["MongoSupervisionStore"]
