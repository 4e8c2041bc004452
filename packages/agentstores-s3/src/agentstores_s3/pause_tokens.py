"""PauseTokenStore on S3: a key's tokens live in its header (id -> owner, expiry, status,
payload), so put, claim and abandon are each one conditional header write: of any
number of racing claims exactly one sees ``pending`` in the version it replaces.

The header stays bounded: beyond :data:`SETTLED_KEPT` settled tokens (claimed,
abandoned, or expired unclaimed; none can ever be claimed again), the oldest are moved
out. Each first gets a marker object ``t/<life>/<sha256(id)>`` holding its expiry and
status but not its payload, written before the header that drops it (and the header then
says ``spilled``); a token id missing from a spilled header is looked up there. So a
claimed token stays refused (``AlreadyClaimedError``), an expired one ``ExpiredError``,
and ``put`` of a settled id is refused as existing, however long ago it was settled. A
marker can only hold a token's earlier settled state (a marker whose write raced a later
status change), and every settled state is unclaimable.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from agentstores.errors import Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.stores import PauseTokenStore, kit

from ._base import S3StoreBase, off_loop
from .header import LIVE, Head, Outcome, Root, dumps, loads

SETTLED_KEPT = 16
"""Settled tokens a header keeps; older ones are moved to marker objects."""


def _settled(token: dict[str, Any], now: int) -> bool:
    return bool(token["s"] != "pending" or token["x"] <= now)


class S3PauseTokenStore(S3StoreBase, PauseTokenStore):
    @staticmethod
    def _marker(key: ConversationKey, h: Head, token_id: str) -> str:
        digest = hashlib.sha256(token_id.encode()).hexdigest()
        return f"{Root.key_dir(key)}t/{h.get('life', '0')}/{digest}"

    def _spilled(self, key: ConversationKey, h: Head, token_id: str) -> dict[str, Any] | None:
        """The settled record of a token moved out of the header, if it was."""
        if not h.get("spilled"):
            return None
        found = self.root.io.get(self._marker(key, h, token_id))
        if found is None:
            return None
        record: dict[str, Any] = loads(found[0], "a pause token marker")
        return record

    def _prune(self, key: ConversationKey, new: Head, now: int) -> None:
        """Move the oldest settled tokens beyond :data:`SETTLED_KEPT` out of ``new``."""
        tokens: dict[str, Any] = new["tokens"]
        settled = [(t["x"], tid) for tid, t in tokens.items() if _settled(t, now)]
        if len(settled) <= SETTLED_KEPT:
            return
        settled.sort()
        tokens = dict(tokens)
        for _, tid in settled[: len(settled) - SETTLED_KEPT]:
            token = tokens.pop(tid)
            record = {"x": token["x"], "s": token["s"]}
            self.root.io.put(self._marker(key, new, tid), dumps(record))
        new["tokens"] = tokens
        new["spilled"] = True

    def _token(
        self, key: ConversationKey, h: Head | None, status: str, token_id: str, principal: str
    ) -> tuple[dict[str, Any], bool]:
        """The token and whether it is a moved-out (settled, payload-less) record."""
        if status == LIVE and h is not None and h["owner"] == principal:
            token = h["tokens"].get(token_id)
            if token is not None:
                return token, False
            spilled = self._spilled(key, h, token_id)
            if spilled is not None:
                return spilled, True
        raise refusal_error(Refusal.NOT_FOUND, "no such pause token", key=key)

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
            if (
                status == LIVE
                and h is not None
                and (token_id in h["tokens"] or self._spilled(key, h, token_id) is not None)
            ):
                raise refusal_error(
                    Refusal.EXISTS, f"pause token {token_id!r} already exists", key=key
                )
            new = root.claim(key, h, status, principal, epoch)
            tokens = dict(new["tokens"])
            tokens[token_id] = {"x": kit.to_micros(expires_at), "s": "pending", "b": text}
            new["tokens"] = tokens
            self._prune(key, new, now)
            return Outcome(new, None)

        root.transact(key, decide)

    def _mark(self, token_id: str, key: ConversationKey, principal: str, claim: bool) -> bytes:
        root = self.root

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            token, spilled = self._token(key, h, status, token_id, principal)
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
            elif token["s"] == "abandoned" or spilled:
                return Outcome(None, b"")  # a moved-out token's row is released already
            assert not spilled  # a spilled record is settled: refused above
            new = dict(h)
            tokens = dict(h["tokens"])
            tokens[token_id] = {**token, "s": "claimed" if claim else "abandoned"}
            new["tokens"] = tokens
            self._prune(key, new, now)
            return Outcome(new, token["b"].encode())

        result: bytes = root.transact(key, decide)
        return result

    @off_loop
    def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        return self._mark(token_id, key, principal, True)

    @off_loop
    def _abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        self._mark(token_id, key, principal, False)


__all__ = ["SETTLED_KEPT", "S3PauseTokenStore"]
