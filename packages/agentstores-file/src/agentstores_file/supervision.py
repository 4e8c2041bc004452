"""SupervisionStore on files: the row lives in the key header, so a compare-and-swap is
one locked header replace."""

from __future__ import annotations

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView
from agentstores.stores import SupervisionStore, kit

from ._base import FileStoreBase, off_loop
from .header import LIVE


class FileSupervisionStore(FileStoreBase, SupervisionStore):
    @off_loop
    def _compare_and_swap(
        self, key: ConversationKey, principal: str, expected_epoch: int | None, row: SupervisionRow
    ) -> bool:
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
