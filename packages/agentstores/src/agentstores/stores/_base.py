"""What every store ABC shares: the adapter edge (error translation) and argument checks."""

from __future__ import annotations

import enum
import json
from datetime import datetime
from types import TracebackType
from typing import Final, Literal, overload

from ..errors import AgentStoresError, UsageError
from ..keys import ConversationKey
from ..models import JSON, check_counter


class Unset(enum.Enum):
    """The type of :data:`UNSET`: an optional argument the caller did not pass."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = Unset.UNSET
"""Marks an optional argument the caller did not pass (distinct from ``None``)."""


class StoreBase:
    """Shared edge of every store: adapters override :meth:`translate_error` only."""

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        """Map a driver exception to the typed hierarchy; ``None`` lets it propagate."""
        return None

    def translating_errors(
        self, operation: str, key: ConversationKey | None = None
    ) -> TranslatingErrors:
        """Run adapter code, turning driver errors into typed ones with their context.

        A typed error passes unchanged; any other exception goes through
        :meth:`translate_error`, gains ``operation`` and ``key`` context, and is raised
        from the original. An exception ``translate_error`` does not know propagates.
        """
        return TranslatingErrors(self, operation, key)

    def translated(
        self, exc: Exception, operation: str, key: ConversationKey | None = None
    ) -> AgentStoresError | None:
        """What :meth:`translating_errors` raises for ``exc`` (a driver error, typed, with
        its context), or None when ``exc`` propagates unchanged (typed already, or not
        known to :meth:`translate_error`). Core's calls go through
        :meth:`translating_errors`, never around it: an adapter may override that edge to
        do more than translate (MongoDB's raises again a cancellation its driver
        swallowed)."""
        if isinstance(exc, AgentStoresError):
            return None
        translated = self.translate_error(exc)
        if translated is None:
            return None
        translated.context.setdefault("operation", operation)
        if key is not None:
            translated.context.setdefault("key", key)
        return translated


class TranslatingErrors:
    """The ``async with`` of :meth:`StoreBase.translating_errors`: a plain class, since
    it wraps every store call and a generator-based context manager costs more."""

    __slots__ = ("key", "operation", "store")

    def __init__(self, store: StoreBase, operation: str, key: ConversationKey | None) -> None:
        self.store, self.operation, self.key = store, operation, key

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Returning None never swallows: what is not translated propagates unchanged.
        if not isinstance(exc, Exception):
            return
        translated = self.store.translated(exc, self.operation, self.key)
        if translated is not None:
            raise translated from exc


def check_key(key: object) -> ConversationKey:
    """``key`` if it is a :class:`ConversationKey`; ``UsageError`` otherwise."""
    if not isinstance(key, ConversationKey):
        raise UsageError(f"expected a ConversationKey, got {type(key).__name__}")
    return key


@overload
def check_epoch(epoch: object, *, optional: Literal[False]) -> int: ...
@overload
def check_epoch(epoch: object, *, optional: Literal[True] = ...) -> int | None: ...
def check_epoch(epoch: object, *, optional: bool = True) -> int | None:
    """A valid epoch (0 to 2**63 - 1), or ``None`` when optional and not given."""
    if epoch is None and optional:
        return None
    return check_counter(epoch, "epoch")


@overload
def check_limit(limit: object, what: str = ..., *, optional: Literal[False]) -> int: ...
@overload
def check_limit(limit: object, what: str = ..., *, optional: Literal[True] = ...) -> int | None: ...
def check_limit(limit: object, what: str = "limit", *, optional: bool = True) -> int | None:
    """A valid count (0 to 2**63 - 1), or ``None`` when optional and not given."""
    if limit is None and optional:
        return None
    return check_counter(limit, what)


@overload
def check_datetime(value: object, what: str, *, optional: Literal[False] = ...) -> datetime: ...
@overload
def check_datetime(value: object, what: str, *, optional: Literal[True]) -> datetime | None: ...
def check_datetime(value: object, what: str, *, optional: bool = False) -> datetime | None:
    """``value`` if it is a timezone-aware datetime (``None`` allowed when optional)."""
    if value is None and optional:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise UsageError(f"{what} must be a timezone-aware datetime, got {value!r}")
    return value


def encode_json(value: JSON, what: str, max_bytes: int) -> bytes:
    """Canonical JSON bytes for ``value``; refuses what JSON cannot hold or what is too big."""
    try:
        data = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} is not JSON-serializable: {exc}") from exc
    raw = data.encode("utf-8")
    if len(raw) > max_bytes:
        raise UsageError(f"{what} is {len(raw)} bytes; the limit is {max_bytes}")
    return raw


def decode_json(raw: bytes | str) -> JSON:
    """The value canonical JSON bytes (or text) hold."""
    return json.loads(raw)
