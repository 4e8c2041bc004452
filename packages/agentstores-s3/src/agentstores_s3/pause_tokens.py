"""PauseTokenStore on S3: a key's tokens live in its header (id -> owner, expiry, status,
payload), so put, claim and abandon are each one conditional header write: of any
number of racing claims exactly one sees ``pending`` in the version it replaces."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.stores import PauseTokenStore, kit

from ._base import S3StoreBase, off_loop
from .header import LIVE, Head, Outcome


class S3PauseTokenStore(S3StoreBase, PauseTokenStore):
    @staticmethod
    def _token(
        key: ConversationKey, h: Head | None, status: str, token_id: str, principal: str
    ) -> dict[str, Any]:
        token: dict[str, Any] | None = None
        if status == LIVE and h is not None and h["owner"] == principal:
            token = h["tokens"].get(token_id)
        if token is None:
            raise refusal_error(Refusal.NOT_FOUND, "no such pause token", key=key)
        return token

    @off_loop
    def _put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload_json: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        root = self.root
        text = payload_json.decode()

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            root.check(key, h, status, principal, epoch)
            if status == LIVE and h is not None and token_id in h["tokens"]:
                raise refusal_error(
                    Refusal.EXISTS, f"pause token {token_id!r} already exists", key=key
                )
            new = root.claim(key, h, status, principal, epoch)
            tokens = dict(new["tokens"])
            tokens[token_id] = {"x": kit.to_micros(expires_at), "s": "pending", "b": text}
            new["tokens"] = tokens
            return Outcome(new, None)

        root.transact(key, decide)

    def _mark(self, token_id: str, key: ConversationKey, principal: str, claim: bool) -> bytes:
        root = self.root

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            token = self._token(key, h, status, token_id, principal)
            assert h is not None
            if claim:
                if token["s"] != "pending":
                    raise refusal_error(
                        Refusal.ALREADY_CLAIMED,
                        f"pause token {token_id!r} is {token['s']}",
                        key=key,
                    )
                if token["x"] <= now:
                    raise refusal_error(
                        Refusal.EXPIRED, f"pause token {token_id!r} expired", key=key
                    )
            elif token["s"] == "abandoned":
                return Outcome(None, b"")
            new = dict(h)
            tokens = dict(h["tokens"])
            tokens[token_id] = {**token, "s": "claimed" if claim else "abandoned"}
            new["tokens"] = tokens
            return Outcome(new, token["b"].encode())

        result: bytes = root.transact(key, decide)
        return result

    @off_loop
    def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        return self._mark(token_id, key, principal, True)

    @off_loop
    def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        self._mark(token_id, key, principal, False)


__all__ = ["S3PauseTokenStore"]
