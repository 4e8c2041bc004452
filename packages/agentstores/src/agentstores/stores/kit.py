"""The adapter kit: every rule an adapter needs that is not storage, written once.

An engine written in Python (memory, file, MongoDB, S3, and any new adapter) calls these
instead of writing them again. Adapters whose atomicity lives in the server (PL/pgSQL,
Lua) keep a server-side copy of :func:`judge_write` and :func:`check_recording_put`; the
contract suite keeps every copy equal.

- :func:`encode_cursor` / :func:`decode_cursor`: the one keyset cursor of
  ``list_conversations`` (``updated_at`` in microseconds, then the session id);
- :func:`to_micros` / :func:`from_micros`: exact store-clock time as an integer;
- :func:`writer_nonce` / :func:`writer_nonce_hex`: a fork-safe unique label a write
  leaves behind, so a write whose reply was lost can be recognised on read-back;
- :func:`judge_write` / :func:`check_write` / :func:`can_read` / :func:`raised_fence`:
  the key-header rule (erased, owner, fence, then commit) and the visibility rule;
- :func:`check_tail`: a conditional write's tail condition;
- :func:`check_recording_put`: the recording's never-roll-back rule;
- :func:`url_options`: a backend URL's query options, an unknown name refused by name;
- :data:`DEFAULT_TOMBSTONE_TTL`: how long an erased key refuses late writes;
- :func:`tombstone_ttl`: the ``tombstone_ttl`` option checked, at most
  :data:`MAX_TOMBSTONE_TTL` (100 years).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
import secrets
import uuid
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlsplit

from ..errors import InvalidKeyError, Refusal, UsageError, refusal_error
from ..keys import ConversationKey, validate_id
from ..models import RecordedEvent

DEFAULT_TOMBSTONE_TTL = timedelta(days=30)
"""How long an erased conversation's tombstone refuses late writes, unless configured."""
MAX_TOMBSTONE_TTL = timedelta(days=36_525)
"""The longest ``tombstone_ttl`` a backend takes: 100 years, far past any retention
policy and far inside what every backend's clock arithmetic can represent."""

UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


# --- time ------------------------------------------------------------------------------


def to_micros(moment: datetime) -> int:
    """Exact microseconds since the Unix epoch of an aware datetime."""
    return (moment - UNIX_EPOCH) // _MICROSECOND


def from_micros(micros: int | bytes | str) -> datetime:
    """The aware UTC datetime ``micros`` microseconds after the Unix epoch."""
    return UNIX_EPOCH + timedelta(microseconds=int(micros))


# --- the listing cursor ----------------------------------------------------------------

MAX_CURSOR_CHARS = 4096
"""Longest cursor :func:`decode_cursor` reads: twice the longest one :func:`encode_cursor`
makes (a session id of 256 bytes, each escaped as ``\\uXXXX``)."""
_FIRST_MICROS = to_micros(datetime.min.replace(tzinfo=UTC))
_LAST_MICROS = to_micros(datetime.max.replace(tzinfo=UTC))


def encode_cursor(updated_micros: int, session_id: str) -> str:
    """The opaque cursor that resumes a newest-first listing after this row."""
    raw = json.dumps([updated_micros, session_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``(updated_micros, session_id)`` of a cursor :func:`encode_cursor` made.

    Its time is one an aware datetime can hold and its session id a valid id, so a forged
    cursor never reaches a driver as an overflowing int or text it cannot encode.

    Raises:
        UsageError: ``cursor`` is not one this library produced.
    """
    forged = UsageError("cursor is not one this store produced")
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS:
        raise forged
    try:
        updated, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError, RecursionError, binascii.Error) as exc:
        raise forged from exc
    if (
        not isinstance(updated, int)
        or isinstance(updated, bool)
        or not _FIRST_MICROS <= updated <= _LAST_MICROS
    ):
        raise forged
    try:
        validate_id(session_id, "session_id")
    except InvalidKeyError as exc:
        raise forged from exc
    return updated, session_id


def after_cursor(updated_micros: int, session_id: str, cursor: tuple[int, str] | None) -> bool:
    """Whether a row comes strictly after ``cursor`` in newest-first keyset order."""
    if cursor is None:
        return True
    return (updated_micros, session_id) < cursor


# --- the writer nonce ------------------------------------------------------------------

_process_bits = secrets.randbits(64) << 64
_counter = itertools.count(1)


def _reseed() -> None:
    """A forked child must never repeat its parent's nonces."""
    global _process_bits, _counter
    _process_bits = secrets.randbits(64) << 64
    _counter = itertools.count(1)


os.register_at_fork(after_in_child=_reseed)


def writer_nonce() -> uuid.UUID:
    """A label unique across processes and calls: 64 random bits per process, a counter.

    A write records it beside what it changes; after a lost reply, reading it back says
    whether the write landed. Cheaper than ``uuid4`` (no OS randomness per call).
    """
    return uuid.UUID(int=_process_bits | next(_counter))


def writer_nonce_hex() -> str:
    """:func:`writer_nonce` as 32 hex digits, for stores that keep text (five times
    cheaper than building the UUID; it is on every write's path)."""
    return f"{_process_bits | next(_counter):032x}"


# --- the key-header rule ---------------------------------------------------------------


def judge_write(
    *, owner: str | None, fence: int, erased: bool, principal: str, epoch: int | None
) -> Refusal | None:
    """Whether a write by ``principal`` at ``epoch`` may proceed under this key header.

    In order: an erased key refuses (``ERASED``); a key owned by another principal
    refuses (``NOT_OWNED``); an epoch below the fence refuses (``FENCED``). ``owner``
    ``None`` means no header yet: the write may claim the key. ``None`` means proceed;
    the caller then commits with :func:`raised_fence`.
    """
    if erased:
        return Refusal.ERASED
    if owner is None:
        return None
    if owner != principal:
        return Refusal.NOT_OWNED
    if epoch is not None and epoch < fence:
        return Refusal.FENCED
    return None


def check_write(
    key: ConversationKey,
    *,
    owner: str | None,
    fence: int,
    erased: bool,
    principal: str,
    epoch: int | None,
    erased_until: datetime | None = None,
) -> None:
    """:func:`judge_write`, raising its refusal as the typed error.

    ``erased_until`` is when an erased key's tombstone lapses (its erase time plus the
    backend's ``tombstone_ttl``, store clock): the ``ErasedError`` carries it as ``until``.

    Raises:
        ErasedError: the key is erased (``.until`` set from ``erased_until``).
        NotOwnedError: another principal owns the key.
        FencedError: ``epoch`` is below the key's fence (``.epoch`` and ``.fence`` set).
    """
    refusal = judge_write(owner=owner, fence=fence, erased=erased, principal=principal, epoch=epoch)
    if refusal is not None:
        until = erased_until if refusal is Refusal.ERASED else None
        raise refusal_error(refusal, key=key, epoch=epoch, fence=fence, until=until)


def check_tail(key: ConversationKey, tail: str | None, expected: str | None) -> None:
    """Refuse a write conditioned on the transcript's tail unless ``tail`` (the last
    message id the store holds, ``None`` when empty) is ``expected``.

    Raises:
        StaleWriteError: naming both (``.tail`` and ``.expected``).
    """
    if tail != expected:
        raise refusal_error(Refusal.STALE_TAIL, key=key, tail=tail, expected=expected)


def raised_fence(fence: int, epoch: int | None) -> int:
    """The fence after an accepted write at ``epoch``: never lowered."""
    return fence if epoch is None or epoch <= fence else epoch


def can_read(
    *, owner: str | None, shared_with: Collection[str], erased: bool, principal: str
) -> bool:
    """Whether ``principal`` sees the key at all: it exists, is not erased, and is theirs
    or shared with them. Anyone else sees exactly what an absent key gives."""
    if owner is None or erased:
        return False
    return owner == principal or principal in shared_with


# --- the recording rule -----------------------------------------------------------------


def check_recording_put(
    key: ConversationKey, event: RecordedEvent, stored: tuple[str, int, int] | None
) -> bool:
    """Whether a put of ``event`` replaces the stored snapshot (docs/semantics.md).

    ``stored`` is the stored snapshot's ``(message_id, epoch, index)``, None when there
    is none. Called after :func:`check_write`, before anything is written.

    Returns:
        False for a late flush: the same message id and epoch with a lower index (the
        snapshot never rolls back; the put changes nothing). True otherwise.

    Raises:
        FencedError: ``event.epoch`` is below the stored snapshot's (``.fence`` is it).
    """
    if stored is None:
        return True
    message_id, epoch, index = stored
    if event.epoch < epoch:
        raise refusal_error(
            Refusal.FENCED,
            f"epoch {event.epoch} is below the recording's {epoch}",
            key=key,
            epoch=event.epoch,
            fence=epoch,
        )
    return not (message_id == event.message_id and epoch == event.epoch and event.index < index)


# --- options ---------------------------------------------------------------------------

_TTL_RULE = (
    "tombstone_ttl must be a timedelta or a number of seconds, above zero and at most "
    "100 years (MAX_TOMBSTONE_TTL)"
)


def tombstone_ttl(value: timedelta | float | int | str | None) -> timedelta:
    """The ``tombstone_ttl`` option checked: how long an erased key refuses late writes.

    ``None`` is :data:`DEFAULT_TOMBSTONE_TTL`; a number, or its text from a URL query, is
    seconds. Every backend calls this when the bundle is made, so a bad value fails there,
    in the same words everywhere, instead of at the first write in the store's own words
    (PostgreSQL: ``timestamp out of range``) or silently (a zero taken as the default).

    Raises:
        UsageError: ``value`` is a bool, not a duration, not above zero, or above
            :data:`MAX_TOMBSTONE_TTL` (100 years); ``context["option"]`` is
            ``tombstone_ttl``.
    """
    if value is None:
        return DEFAULT_TOMBSTONE_TTL
    refused = UsageError(f"{_TTL_RULE}, got {value!r}", option="tombstone_ttl")
    if isinstance(value, timedelta):
        ttl = value
    elif isinstance(value, bool):
        raise refused
    else:
        try:
            seconds = float(value)
        except (TypeError, ValueError, OverflowError):
            raise refused from None
        if not 0 < seconds <= MAX_TOMBSTONE_TTL.total_seconds():  # NaN and inf fail here
            raise refused
        ttl = timedelta(seconds=seconds)
    if not timedelta(0) < ttl <= MAX_TOMBSTONE_TTL:  # also seconds that round to zero
        raise refused
    return ttl


# --- URLs ------------------------------------------------------------------------------


def url_options(
    url: str, known: Collection[str], *, backend: str, hint: str = ""
) -> list[tuple[str, str]]:
    """The query options of a backend URL as ``(name, value)`` pairs, in order.

    Called when the bundle is made, so a mistyped option fails before any connection
    instead of being dropped or handed to a driver that fails later.

    Args:
        url: the backend URL.
        known: every option name the backend takes from the query string.
        backend: the backend's name, for the message.
        hint: appended to the message (e.g. where other settings go).

    Raises:
        UsageError: an option is not in ``known``; the message names it and the known ones.
    """
    query = urlsplit(url).query
    pairs = parse_qsl(query, keep_blank_values=True)
    for name, _ in pairs:
        if name not in known:
            choices = ", ".join(sorted(known)) or "none"
            raise UsageError(
                f"unknown {backend} URL option {name!r}; known: {choices}{hint}",
                option=name,
            )
    return pairs


__all__ = [
    "DEFAULT_TOMBSTONE_TTL",
    "MAX_CURSOR_CHARS",
    "MAX_TOMBSTONE_TTL",
    "UNIX_EPOCH",
    "after_cursor",
    "can_read",
    "check_recording_put",
    "check_write",
    "decode_cursor",
    "encode_cursor",
    "from_micros",
    "judge_write",
    "raised_fence",
    "to_micros",
    "tombstone_ttl",
    "url_options",
    "writer_nonce",
    "writer_nonce_hex",
]
