"""SupervisionStore on Redis: the row is a hash beside the key's header; CAS is one script."""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, SupervisionView
from agentstores.stores import SupervisionStore
from agentstores.stores.kit import from_micros

from ._base import RedisStoreBase, claim_args, raise_for, text
from .lua import SV_CAS, SV_DELETE, SV_READ

_TRUE = [b"ok", b"1"]


class RedisSupervisionStore(RedisStoreBase, SupervisionStore):
    async def _compare_and_swap(
        self,
        key: ConversationKey,
        principal: str,
        expected_epoch: int | None,
        row: SupervisionRow,
    ) -> bool:
        names = self.ctx.keys.conv(key)
        args = claim_args(
            principal,
            key,
            "" if expected_epoch is None else str(expected_epoch),
            row.status,
            row.message_id,
            str(row.epoch),
        )
        reply = await self._write(
            SV_CAS, [names.header, names.supervision], args, from_result=lambda _r: _TRUE
        )
        raise_for(reply, key)
        return bool(reply[1] == b"1")

    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        names = self.ctx.keys.conv(key)
        reply = await self.ctx.client.read(SV_READ, [names.header, names.supervision], [principal])
        now = from_micros(reply[0])
        if len(reply) == 1:
            return SupervisionView(None, now, 0)
        fence, owner, status, mid, epoch, heartbeat = reply[1:7]
        row = None
        if epoch is not None:
            row = SupervisionRow(
                status=text(status),  # type: ignore[arg-type]
                message_id=text(mid),
                epoch=int(epoch),
                heartbeat_at=from_micros(heartbeat),
                owner=text(owner),
            )
        return SupervisionView(row, now, int(fence))

    async def _delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        names = self.ctx.keys.conv(key)
        reply = await self._write(
            SV_DELETE,
            [names.header, names.supervision],
            [principal, message_id, str(epoch)],
            from_result=lambda _r: _TRUE,
        )
        raise_for(reply, key)
        return bool(reply[1] == b"1")
