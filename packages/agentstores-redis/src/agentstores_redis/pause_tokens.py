"""PauseTokenStore on Redis: one hash of tokens per conversation (erased with it).

A claim whose reply is lost is reconciled through the claim nonce kept in the token, so
the single-use payload is not burnt by a dropped connection."""

from __future__ import annotations

from datetime import datetime

from agentstores.errors import Refusal, UnknownOutcomeError, refusal_error
from agentstores.keys import ConversationKey
from agentstores.stores import PauseTokenStore
from agentstores.stores.kit import to_micros, writer_nonce_hex

from ._base import RedisStoreBase, claim_args, epoch_arg, raise_for
from .client import Uncertain
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
        names = self.ctx.keys.conv(key)
        args = claim_args(
            principal, key, token_id, payload_json, str(to_micros(expires_at)), epoch_arg(epoch)
        )
        reply = await self._write(
            PT_PUT, [names.header, names.pause_tokens], args, from_result=lambda _r: [b"ok", b"1"]
        )
        if reply[0] == b"exists":
            raise refusal_error(Refusal.EXISTS, f"pause token {token_id!r} already exists", key=key)
        raise_for(reply, key, epoch=epoch)

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        names = self.ctx.keys.conv(key)
        nonce = writer_nonce_hex()
        try:
            reply = await self.ctx.client.write(
                PT_CLAIM, [names.header, names.pause_tokens], [nonce, principal, token_id]
            )
        except Uncertain as exc:
            try:
                reply = await self.ctx.client.read(
                    PT_RECONCILE, [names.header, names.pause_tokens], [token_id, nonce]
                )
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
        if code == b"not_found":
            raise _no_token(key)
        if code == b"already_claimed":
            status = _STATUS.get(reply[1], "claimed")
            raise refusal_error(
                Refusal.ALREADY_CLAIMED, f"pause token {token_id!r} is {status}", key=key
            )
        if code == b"expired":
            raise refusal_error(Refusal.EXPIRED, f"pause token {token_id!r} expired", key=key)
        raise RuntimeError(f"unexpected script reply {reply!r}")

    async def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        names = self.ctx.keys.conv(key)
        nonce = writer_nonce_hex()
        try:
            reply = await self.ctx.client.write(
                PT_ABANDON, [names.header, names.pause_tokens], [nonce, principal, token_id]
            )
        except Uncertain as exc:
            # Abandoning is idempotent (the status only ever becomes "abandoned"), so
            # sending it again cannot apply anything twice; anything but success on the
            # second try leaves the first one's outcome unknown.
            reply = await self.ctx.client.write(
                PT_ABANDON, [names.header, names.pause_tokens], [nonce, principal, token_id]
            )
            if reply[0] != b"ok":
                raise UnknownOutcomeError(
                    f"abandon of {token_id!r}: connection lost after the request was sent",
                    key=key,
                ) from exc
        if reply[0] == b"not_found":
            raise _no_token(key)
        raise_for(reply, key)


def _no_token(key: ConversationKey) -> Exception:
    return refusal_error(Refusal.NOT_FOUND, "no such pause token", key=key)
