"""The agent state: versions in ``<prefix>state`` ({g, w, d}); the header's ``st`` names
the committed one. A save writes its version first and commits by the header CAS; the
version it replaces is deleted after (the header's redo, finished by the next writer if
this one stops)."""

from __future__ import annotations

from bson.binary import Binary

from agentstores.keys import ConversationKey
from agentstores.stores import AgentStateStore, kit

from ._base import MongoStoreBase, resent
from .header import ABSENT, EXPIRED, RETRY, Header, Retry, commit, ensure_header, read_header, write

READS = 8
"""Header reads a load tries when saves keep replacing the version it was about to read."""


class MongoAgentStateStore(MongoStoreBase, AgentStateStore):
    @resent
    async def _load(self, key: ConversationKey, principal: str) -> bytes | None:
        ctx = self.ctx
        for _ in range(READS):
            h = await read_header(ctx, key)
            if not h.can_read(principal) or h.get("st") is None:
                return None
            doc = await ctx.state.find_one({"g": h.gen, "w": h.get("st")}, {"d": 1})
            if doc is not None:
                return bytes(doc["d"])
        from agentstores.errors import ConflictError

        raise ConflictError("the state kept being replaced while it was read; retry", key=key)

    @resent
    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        ctx = self.ctx

        async def attempt(h: Header) -> Retry | None:
            h.check_write(principal, epoch)
            if h.doc is None:
                await ensure_header(ctx, key)
                return RETRY
            fields, gen = h.claim(principal)
            nonce = kit.writer_nonce_hex()
            await ctx.state.insert_one({"g": gen, "w": nonce, "d": Binary(blob)})
            old = h.get("st")
            fields["f"] = kit.raised_fence(h.fence, epoch)
            fields["st"] = nonce
            redo = [["state", gen, old]] if old is not None else None
            if await commit(ctx, h, fields, redo=redo):
                return None
            await ctx.state.delete_one({"g": gen, "w": nonce})
            return RETRY

        await write(ctx, key, attempt)

    @resent
    async def _delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        ctx = self.ctx

        async def attempt(h: Header) -> Retry | None:
            if h.status in (ABSENT, EXPIRED):
                return None
            h.check_write(principal, epoch)
            fence = kit.raised_fence(h.fence, epoch)
            old = h.get("st")
            if old is None and fence == h.fence:
                return None
            redo = [["state", h.gen, old]] if old is not None else None
            return None if await commit(ctx, h, {"f": fence, "st": None}, redo=redo) else RETRY

        await write(ctx, key, attempt)


__all__ = ["MongoAgentStateStore"]
