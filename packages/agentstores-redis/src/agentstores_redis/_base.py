"""What every Redis store shares: the bundle context, the write path with reconciliation,
reply decoding and the mapping of script refusals to typed errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentstores.errors import AgentStoresError, Refusal, UnknownOutcomeError, refusal_error
from agentstores.keys import ConversationKey
from agentstores.stores.conversation_metadata import over_limit
from agentstores.stores.kit import from_micros, writer_nonce_hex

from .client import EncodableT, NotDurable, RedisClient, Script, Uncertain
from .errors import translate
from .keys import KeySpace
from .lua import RECONCILE


def text(value: bytes | str) -> str:
    """A reply value as text."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


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
        wrote: Callable[[Any], bool] | None = None,
        from_result: Callable[[bytes], Any] | None = None,
    ) -> Any:
        """Run a writing script with a fresh writer nonce as ``ARGV[1]``, before ``args``.

        A reply lost with its connection is reconciled through the nonce the script
        leaves in the header (``from_result`` rebuilds the reply from the stored result)
        or raised as :class:`UnknownOutcomeError`."""
        nonce = writer_nonce_hex()
        try:
            return await self.ctx.client.write(script, keys, (nonce, *args))
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


def raise_for(
    reply: Any,
    key: ConversationKey,
    *,
    epoch: int | None = None,
    expected: str | None = None,
) -> None:
    """Raise the typed error for a script's refusal reply; return for ``ok``/``noop``.

    Scripts reply a :class:`~agentstores.errors.Refusal` value as their first element:
    ``{'fenced', fence}`` raises ``FencedError`` with ``epoch`` and ``fence``,
    ``{'stale_tail', tail}`` raises ``StaleWriteError`` with ``tail`` and ``expected``,
    ``{'erased', until}`` raises ``ErasedError`` with ``until`` (microseconds on the store
    clock; empty when the header has no expiry).
    """
    code = reply[0]
    if code in (b"ok", b"noop"):
        return
    if code == b"too_big":
        raise over_limit(int(reply[1]))
    try:
        refusal = Refusal(text(code))
    except ValueError:
        raise RuntimeError(f"unexpected script reply {reply!r}") from None
    if refusal is Refusal.FENCED:
        raise refusal_error(refusal, key=key, epoch=epoch, fence=int(reply[1]))
    if refusal is Refusal.STALE_TAIL:
        raise refusal_error(refusal, key=key, tail=text(reply[1]) or None, expected=expected)
    if refusal is Refusal.ERASED:
        until = text(reply[1]) if len(reply) > 1 else ""
        raise refusal_error(refusal, key=key, until=from_micros(until) if until else None)
    raise refusal_error(refusal, key=key)


def claim_args(principal: str, key: ConversationKey, *rest: EncodableT) -> list[EncodableT]:
    """The arguments of a write that may claim the key: the principal and the raw key
    (kept in the header by the first write), then the script's own."""
    return [principal, key.tenant, key.session_id, *rest]


def epoch_arg(epoch: int | None) -> str:
    """An optional epoch as a script argument: ``''`` when the write carries none."""
    return "" if epoch is None else str(epoch)


__all__ = [
    "Context",
    "RedisStoreBase",
    "claim_args",
    "default_wrote",
    "epoch_arg",
    "raise_for",
    "text",
]
