"""PauseTokenStore on Redis: one hash of tokens per conversation (erased with it).

A claim whose reply is lost is reconciled through the claim nonce kept in the token, so
the single-use payload is not burnt by a dropped connection."""

from __future__ import annotations

from datetime import datetime

from agentstores.errors import (
    AlreadyClaimedError,
    ExpiredError,
    NotFoundError,
    UnknownOutcomeError,
)
from agentstores.keys import ConversationKey
from agentstores.stores import PauseTokenStore

from ._base import RedisStoreBase, ep, nonce, raise_for, to_us
from .client import EncodableT, Uncertain
from .lua import PT_ABANDON, PT_CLAIM, PT_PUT, PT_RECONCILE

_STATUS = {b"C": "claimed", b"A": "abandoned"}


class RedisPauseTokenStore(RedisStoreBase, PauseTokenStore):
    async def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        k = self.ctx.keys.conv(key)
        n = nonce()
        args: list[EncodableT] = [
            n,
            principal,
            key.tenant,
            key.session_id,
            token_id,
            payload_json,
            str(to_us(expires_at)),
            ep(epoch),
        ]
        reply = await self._write(
            PT_PUT, [k.h, k.pt], args, nonce=n, from_result=lambda _r: [b"ok", b"1"]
        )
        if reply[0] == b"conflict":
            raise _conflict(token_id, key)
        raise_for(reply, key, epoch=epoch)

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        k = self.ctx.keys.conv(key)
        n = nonce()
        try:
            reply = await self.ctx.client.write(PT_CLAIM, [k.h, k.pt], [n, principal, token_id])
        except Uncertain as exc:
            try:
                reply = await self.ctx.client.read(PT_RECONCILE, [k.h, k.pt], [token_id, n])
            except Exception:
                reply = [b"unknown"]
            if reply[0] != b"ok" or self.ctx.waits:
                raise UnknownOutcomeError(
                    f"claim of {token_id!r}: connection lost after the request was sent; "
                    "the token may have been claimed",
                    key=key,
                ) from exc
            self.ctx.reconciled += 1
        code = reply[0]
        if code == b"ok":
            payload: bytes = reply[1]
            return payload
        if code == b"notfound":
            raise NotFoundError("no such pause token", key=key)
        if code == b"claimed":
            status = _STATUS.get(reply[1], "claimed")
            raise AlreadyClaimedError(f"pause token {token_id!r} is {status}", key=key)
        if code == b"expired":
            raise ExpiredError(f"pause token {token_id!r} expired", key=key)
        raise RuntimeError(f"unexpected script reply {reply!r}")

    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        k = self.ctx.keys.conv(key)
        n = nonce()
        try:
            reply = await self.ctx.client.write(PT_ABANDON, [k.h, k.pt], [n, principal, token_id])
        except Uncertain as exc:
            # Abandoning is idempotent (the status only ever becomes "abandoned"), so
            # sending it again cannot apply anything twice; anything but success on the
            # second try leaves the first one's outcome unknown.
            reply = await self.ctx.client.write(PT_ABANDON, [k.h, k.pt], [n, principal, token_id])
            if reply[0] != b"ok":
                raise UnknownOutcomeError(
                    f"abandon of {token_id!r}: connection lost after the request was sent",
                    key=key,
                ) from exc
        if reply[0] == b"notfound":
            raise NotFoundError("no such pause token", key=key)
        raise_for(reply, key)


def _conflict(token_id: str, key: ConversationKey) -> Exception:
    from agentstores.errors import ConflictError

    return ConflictError(f"pause token {token_id!r} already exists", key=key)
