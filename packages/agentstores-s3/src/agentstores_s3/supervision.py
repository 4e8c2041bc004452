"""SupervisionStore on S3: the row lives in the key header, so a compare-and-swap is one
conditional header write (GET + ``If-Match`` PUT, again when another writer won)."""

from __future__ import annotations

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView
from agentstores.stores import SupervisionStore, kit

from ._base import S3StoreBase, off_loop
from .header import LIVE, Head, Outcome


class S3SupervisionStore(S3StoreBase, SupervisionStore):
    @off_loop
    def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
        root = self.root

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            refusal = root.judge(h, status, principal, row.epoch)
            if refusal is Refusal.NOT_OWNED:
                raise refusal_error(refusal, key=key)
            if refusal is not None:  # erased, or fenced: the swap just loses
                return Outcome(None, False)
            current = h["sup"] if status == LIVE and h is not None else None
            if expected_epoch is None:
                if current is not None:
                    return Outcome(None, False)
            elif current is None or current["e"] != expected_epoch:
                return Outcome(None, False)
            new = root.claim(key, h, status, principal, row.epoch)
            new["sup"] = {"s": row.status, "m": row.message_id, "e": row.epoch, "hb": now}
            return Outcome(new, True)

        return bool(root.transact(key, decide))

    @off_loop
    def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        h, status, now = self.root.read(key)
        if not self.root.visible(h, status, principal) or h is None:
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

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            if status != LIVE or h is None:
                return Outcome(None, False)
            root.check(key, h, status, principal, None)
            sup = h["sup"]
            if sup is None or sup["m"] != message_id or sup["e"] != epoch:
                return Outcome(None, False)
            new = dict(h)
            new["sup"] = None
            return Outcome(new, True)

        return bool(root.transact(key, decide))


__all__ = ["S3SupervisionStore"]
