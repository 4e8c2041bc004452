"""AgentStateStore on Redis: the blob is one string key beside the header (any size the
server's proto-max-bulk-len allows; 512 MiB by default)."""

from __future__ import annotations

from agentstores.keys import ConversationKey
from agentstores.stores import AgentStateStore

from ._base import RedisStoreBase, claim_args, epoch_arg, raise_for
from .lua import ST_DELETE, ST_LOAD, ST_SAVE

_OK = [b"ok", b"1"]


class RedisAgentStateStore(RedisStoreBase, AgentStateStore):
    async def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        names = self.ctx.keys.conv(key)
        reply = await self.ctx.client.read(ST_LOAD, [names.header, names.state], [principal])
        if not reply or reply[0] is None:
            return None
        blob: bytes = reply[0]
        return blob

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        names = self.ctx.keys.conv(key)
        args = claim_args(principal, key, blob, epoch_arg(epoch))
        reply = await self._write(
            ST_SAVE, [names.header, names.state], args, from_result=lambda _r: _OK
        )
        raise_for(reply, key, epoch=epoch)

    async def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        names = self.ctx.keys.conv(key)
        args = claim_args(principal, key, epoch_arg(epoch))
        reply = await self._write(
            ST_DELETE, [names.header, names.state], args, from_result=lambda _r: _OK
        )
        raise_for(reply, key, epoch=epoch)
