"""What every store ABC shares: the adapter edge (error translation) and argument checks."""

from __future__ import annotations

import enum
import itertools
import json
import sys
from datetime import UTC, datetime
from types import TracebackType
from typing import Final, Literal, overload

from ..errors import AgentStoresError, UsageError
from ..keys import ConversationKey
from ..models import JSON, check_counter
from .wakeups import Wakeups


class Unset(enum.Enum):
    """The type of :data:`UNSET`: an optional argument the caller did not pass."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = Unset.UNSET
"""Marks an optional argument the caller did not pass (distinct from ``None``)."""

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects in a JSON value any store takes (a scalar is
depth 0, ``[]`` and ``{}`` depth 1): what MongoDB allows a document and Ruby's JSON
parser by default, and far inside Python's recursion limit, so every backend writes and
reads back what it accepted, envelope included."""


class StoreBase:
    """Shared edge of every store: adapters override :meth:`translate_error` only."""

    wakeups: Wakeups | None = None
    """The bundle's wake-ups (set when it opens): a write a follower cares about wakes
    this process's watchers of its key (:meth:`woke`)."""

    def woke(self, key: ConversationKey) -> None:
        """Wake this process's watchers of ``key`` (after a write that changed it)."""
        if self.wakeups is not None:
            self.wakeups.notify(key)

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
    """``value`` if it is a timezone-aware datetime that UTC can represent (``None``
    allowed when optional): every backend keeps instants in UTC, and one past
    ``datetime.max`` there would be written, then fail every read."""
    if value is None and optional:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise UsageError(f"{what} must be a timezone-aware datetime, got {value!r}")
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise UsageError(f"{what} {value!r} is outside the range of UTC datetimes") from None
    return value


def check_text(value: object, what: str) -> str:
    """``value`` if it is a str every backend can encode (UTF-8: no lone surrogate)."""
    if not isinstance(value, str):
        raise UsageError(f"{what} must be a str, got {type(value).__name__}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"{what} holds a lone surrogate: not valid Unicode text") from None
    return value


def encode_json(value: JSON, what: str, max_bytes: int) -> bytes:
    """Canonical JSON bytes for ``value``; refuses what JSON cannot hold (a lone
    surrogate in any string included), what is nested deeper than
    :data:`MAX_JSON_DEPTH` and what is over ``max_bytes``."""
    try:
        data = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except RecursionError:
        raise _too_deep(what) from None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} is not JSON-serializable: {exc}") from exc
    try:
        raw = data.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what} holds a lone surrogate: not valid Unicode text") from None
    if len(raw) > max_bytes:
        raise UsageError(f"{what} is {len(raw)} bytes; the limit is {max_bytes}")
    if _deeper_than(raw, MAX_JSON_DEPTH):
        raise _too_deep(what)
    return raw


def check_json(value: JSON, what: str) -> None:
    """:func:`encode_json`'s refusals, for a value with no size limit of its own."""
    encode_json(value, what, sys.maxsize)


def _too_deep(what: str) -> UsageError:
    return UsageError(f"{what} is nested deeper than {MAX_JSON_DEPTH} arrays and objects")


_NOT_MARKS = bytes(sorted(set(range(256)) - set(b'"[]{}')))
"""Every byte but quotes and brackets."""
_ONE_KIND = bytes.maketrans(b"{}", b"[]")
"""Objects as arrays: only the nesting counts."""
_STEPS = bytes.maketrans(b"[]", b"\x01\xff")
"""An opening bracket as +1, a closing one as -1 (signed bytes)."""
_PEELED = 4
"""Levels of innermost containers removed before the running count (most values'
containers are leaves or near them, so few brackets are left to count)."""


def _deeper_than(raw: bytes, limit: int) -> bool:
    """Whether canonical JSON ``raw`` nests arrays and objects deeper than ``limit``.

    It reads the encoder's output, never the value again: one that opens at most
    ``limit`` brackets (most values) cannot be deeper, so only larger ones are measured,
    in C loops throughout: escaped backslashes and quotes go, so the quotes left delimit
    strings; then every byte but quotes and brackets, then the strings (each an adjacent
    pair of quotes unless it holds a bracket); then the innermost containers, a level per
    pass; what is left by a running count.
    """
    if len(raw) <= 2 * limit or raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = raw.translate(_ONE_KIND, _NOT_MARKS)
    brackets = marks.replace(b'""', b"")
    if b'"' in brackets:  # a string holds a bracket: cut every string's content out
        brackets = b"".join(marks.split(b'"')[::2])
    peeled = 0
    while brackets and peeled < _PEELED:
        brackets = brackets.replace(b"[]", b"")
        peeled += 1
    if not brackets:
        return peeled > limit
    steps = memoryview(brackets.translate(_STEPS)).cast("b")
    return peeled + max(itertools.accumulate(steps)) > limit


def decode_json(raw: bytes | str) -> JSON:
    """The value canonical JSON bytes (or text) hold."""
    return json.loads(raw)
