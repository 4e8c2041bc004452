"""Pause tokens: one document each in ``<prefix>tokens`` ({g, t, p, x, d, s, ok, b, w};
``x`` is expires_at in microseconds), unique on (generation, token id).

A put writes its token unconfirmed (``ok`` false), commits by the header CAS naming the
token in its redo, then marks it ``ok``; a token counts once it is ``ok`` or named by
the header's redo. A claim is one filtered ``update_one`` from pending to claimed, with
the server clock's expiry in the filter and the claimer's nonce in the update, so a
claim whose reply was lost is settled by reading the token back."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from bson.binary import Binary
from pymongo.errors import DuplicateKeyError

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.stores import PauseTokenStore, kit

from ._base import MongoStoreBase, resent
from .errors import LostReply, is_connection_error, maybe_sent
from .header import (
    RETRY,
    Header,
    Retry,
    commit,
    ensure_header,
    finish_quietly,
    read_header,
    retire,
    write,
)

CLAIM_ATTEMPTS = 8


def _committed(doc: dict[str, Any], h: Header) -> bool:
    if doc.get("ok"):
        return True
    return ["token", doc["g"], doc["t"], doc["w"]] in h.redo


class MongoPauseTokenStore(MongoStoreBase, PauseTokenStore):
    @resent
    async def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        ctx = self.ctx

        async def attempt(h: Header) -> Retry | None:
            h.check_write(principal, epoch)
            if h.doc is None:
                await ensure_header(ctx, key)
                return RETRY
            fields, gen = h.claim(principal)
            nonce = kit.writer_nonce_hex()
            if not fields:
                found = await ctx.tokens.find_one({"g": gen, "t": token_id})
                if found is not None:
                    if _committed(found, h):
                        raise refusal_error(
                            Refusal.EXISTS, f"pause token {token_id!r} already exists", key=key
                        )
                    if found["b"] >= h.rev:  # in flight (above: our header is stale)
                        await retire(ctx, h)
                    else:  # written at a rev the header passed uncommitted: garbage
                        await ctx.tokens.delete_one({"_id": found["_id"], "ok": False})
                    return RETRY
            doc = {
                "g": gen,
                "t": token_id,
                "p": principal,
                "x": kit.to_micros(expires_at),
                "d": Binary(payload_json),
                "s": "pending",
                "ok": False,
                "b": h.rev,
                "w": nonce,
            }
            try:
                await ctx.tokens.insert_one(doc)
            except DuplicateKeyError:
                return RETRY
            fields["f"] = kit.raised_fence(h.fence, epoch)
            if await commit(ctx, h, fields, redo=[["token", gen, token_id, nonce]]):
                return None
            await ctx.tokens.delete_one({"g": gen, "t": token_id, "w": nonce, "ok": False})
            return RETRY

        await write(ctx, key, attempt)

    async def _token(self, token_id: str, key: ConversationKey, principal: str) -> dict[str, Any]:
        """The committed token ``principal`` may claim or abandon, or ``NotFoundError``."""
        ctx = self.ctx
        h = await read_header(ctx, key)
        if h.live is None or h.owner != principal:
            raise refusal_error(Refusal.NOT_FOUND, "no such pause token", key=key)
        await finish_quietly(ctx, h.redo)
        found = await ctx.tokens.find_one({"g": h.gen, "t": token_id})
        if found is None or not _committed(found, h) or found["p"] != principal:
            raise refusal_error(Refusal.NOT_FOUND, "no such pause token", key=key)
        token: dict[str, Any] = found
        return token

    async def _still_live(self, key: ConversationKey, gen: str) -> bool:
        """Whether the key still holds the generation a token belongs to (an erasure that
        came between reading the token and claiming it takes the token with it)."""
        h = await read_header(self.ctx, key)
        return h.gen == gen

    @resent
    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        ctx = self.ctx
        mine: set[str] = set()  # nonces of this call's claims whose replies were lost
        for _ in range(CLAIM_ATTEMPTS):
            found = await self._token(token_id, key, principal)
            if found["s"] == "claimed" and found.get("cw") in mine:
                return bytes(found["d"])
            if found["s"] != "pending":
                raise refusal_error(
                    Refusal.ALREADY_CLAIMED, f"pause token {token_id!r} is {found['s']}", key=key
                )
            now = kit.to_micros(await ctx.now())
            if found["x"] <= now:
                raise refusal_error(Refusal.EXPIRED, f"pause token {token_id!r} expired", key=key)
            nonce = kit.writer_nonce_hex()
            try:
                claimed = await ctx.tokens.update_one(
                    {"_id": found["_id"], "s": "pending", "x": {"$gt": now}},
                    {"$set": {"s": "claimed", "cw": nonce}},
                )
                landed = claimed.matched_count == 1
            except Exception as exc:
                if not maybe_sent(exc):
                    raise
                mine.add(nonce)
                landed = await self._reconcile_claim(found["_id"], nonce, exc)
            if landed:
                if not await self._still_live(key, found["g"]):
                    raise refusal_error(Refusal.NOT_FOUND, "no such pause token", key=key)
                return bytes(found["d"])
        raise refusal_error(
            Refusal.ALREADY_CLAIMED, f"pause token {token_id!r} was taken meanwhile", key=key
        )

    async def _reconcile_claim(self, token: Any, nonce: str, cause: BaseException) -> bool:
        """Whether a claim whose reply was lost landed: the token names its claimer."""
        deadline = time.monotonic() + self.ctx.reconcile_window
        while True:
            try:
                doc = await self.ctx.tokens.find_one({"_id": token}, {"cw": 1})
                return doc is not None and doc.get("cw") == nonce
            except Exception as exc:
                if not is_connection_error(exc) or time.monotonic() > deadline:
                    raise LostReply(f"{cause}; reading the token back failed: {exc}") from exc
                await asyncio.sleep(0.1)

    @resent
    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        found = await self._token(token_id, key, principal)
        if found["s"] != "abandoned":
            await self.ctx.tokens.update_one(
                {"_id": found["_id"], "s": {"$ne": "abandoned"}}, {"$set": {"s": "abandoned"}}
            )


__all__ = ["MongoPauseTokenStore"]
