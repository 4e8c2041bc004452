"""What every Redis store shares: the bundle context, the write path with reconciliation,
reply decoding and store-clock conversions."""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agentstores.errors import (
    AgentStoresError,
    ConflictError,
    ErasedError,
    FencedError,
    NotFoundError,
    NotOwnedError,
    UnknownOutcomeError,
)
from agentstores.keys import ConversationKey

from .client import EncodableT, NotDurable, RedisClient, Script, Uncertain
from .errors import translate
from .keys import KeySpace
from .lua import RECONCILE

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def to_us(value: datetime) -> int:
    """Exact microseconds since the Unix epoch of an aware datetime."""
    return (value - EPOCH) // _US


def from_us(value: int | bytes | str) -> datetime:
    return EPOCH + timedelta(microseconds=int(value))


def text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


_PROCESS = secrets.token_hex(8)
_counter = itertools.count()


def _reseed() -> None:
    global _PROCESS, _counter
    _PROCESS = secrets.token_hex(8)
    _counter = itertools.count()


os.register_at_fork(after_in_child=_reseed)  # a forked child must not reuse the parent's nonces


def nonce() -> str:
    """A writer nonce, unique across processes and calls (a random per-process part and a
    counter): stored in the key's header by the write it labels."""
    return f"{_PROCESS}{next(_counter):x}"


@dataclass
class Context:
    """Shared by the stores of one bundle."""

    client: RedisClient
    keys: KeySpace
    tombstone_ttl_ms: int
    expiry_grace_us: int
    waits: bool
    reconciled: int = 0
    """Writes whose reply was lost and whose outcome was recovered from the header nonce."""
    pending_index: list[Any] = field(default_factory=list)
    """Index updates whose second step failed, retried before the next listing or sweep."""


class RedisStoreBase:
    """Mixin for every Redis store: error translation and the write path."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        return translate(exc)

    async def _write(
        self,
        script: Script,
        keys: Sequence[str],
        args: Sequence[EncodableT],
        *,
        nonce: str,
        wrote: Callable[[Any], bool] | None = None,
        from_result: Callable[[bytes], Any] | None = None,
    ) -> Any:
        """Run a writing script. A reply lost with its connection is reconciled through
        the nonce the script leaves in the header (``from_result`` rebuilds the reply
        from the stored result) or raised as :class:`UnknownOutcomeError`."""
        try:
            return await self.ctx.client.write(script, keys, args)
        except Uncertain as exc:
            if from_result is not None:
                stored = await self._reconcile(keys[0], nonce)
                if stored is not None and not self.ctx.waits:
                    self.ctx.reconciled += 1
                    return from_result(stored)
            raise UnknownOutcomeError(
                f"{script.name}: connection lost after the request was sent ({exc}); "
                "it may or may not have been applied",
                nonce=nonce,
            ) from exc
        except NotDurable as exc:
            if (wrote or default_wrote)(exc.reply):
                raise
            return exc.reply

    async def _reconcile(self, header: str, nonce: str) -> bytes | None:
        try:
            reply = await self.ctx.client.read(RECONCILE, [header], [nonce])
        except Exception:
            return None
        if reply and reply[0] == b"ok":
            value: bytes = reply[1]
            return value
        return None


def default_wrote(reply: Any) -> bool:
    """Whether a script reply says it changed something (``{'ok', '0'}`` is a no-op)."""
    if not isinstance(reply, list) or not reply or reply[0] != b"ok":
        return False
    return not (len(reply) > 1 and reply[1] == b"0")


def raise_for(reply: Any, key: ConversationKey, *, epoch: int | None = None) -> None:
    """Turn a script's error code into the typed error; return for ``ok``/``noop``."""
    code = reply[0]
    if code in (b"ok", b"noop"):
        return
    if code == b"erased":
        raise ErasedError("the conversation was erased", key=key)
    if code == b"notowned":
        raise NotOwnedError("another principal owns this conversation", key=key)
    if code == b"fenced":
        fence = int(reply[1])
        raise FencedError(
            f"epoch {epoch} is below the fence {fence}", key=key, epoch=epoch, fence=fence
        )
    if code == b"notfound":
        raise NotFoundError("no such conversation", key=key)
    if code == b"conflict":
        raise ConflictError("the key is already in use", key=key)
    raise RuntimeError(f"unexpected script reply {reply!r}")


def ep(epoch: int | None) -> str:
    return "" if epoch is None else str(epoch)


__all__ = [
    "Context",
    "RedisStoreBase",
    "default_wrote",
    "ep",
    "from_us",
    "nonce",
    "raise_for",
    "text",
    "to_us",
]
