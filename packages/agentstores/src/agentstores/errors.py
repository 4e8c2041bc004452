"""The one typed error hierarchy, and the refusal vocabulary adapters speak.

Adapters never build a refusal's error by hand: a storage engine decides a
:class:`Refusal` and :func:`refusal_error` turns it, with its context, into the typed
error, so every backend raises the same class with the same attributes.

No error here is an ``OSError`` (``PermissionError``, ``ConnectionError``): adapters
and callers catch ``OSError`` for what a driver or the system raised, and one of ours
caught there would be mistaken for it (an adapter's ``except OSError`` would report a
``NotOwnedError`` as a lost connection and retry it). The built-in bases kept are the
ones no I/O path catches: ``ValueError``, ``LookupError``, ``NotImplementedError``.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .keys import ConversationKey


class AgentStoresError(Exception):
    """Base of every error this library raises on purpose.

    ``context`` carries what the caller needs to act; the common entries are also
    attributes (``key`` here, ``epoch``/``fence``, ``tail``/``expected``, ``occupant``
    on the classes they belong to), so callers never dig in the dict.
    """

    def __init__(self, message: str = "", **context: Any) -> None:
        super().__init__(message or self.__class__.__name__)
        self.context: dict[str, Any] = context

    @property
    def key(self) -> ConversationKey | None:
        """The conversation the failed call named, when it named one."""
        return self.context.get("key")


class UsageError(AgentStoresError, ValueError):
    """The call itself is wrong (bad argument combination, unknown option)."""


class InvalidKeyError(UsageError):
    """An id (tenant, session, principal, token, message) is empty, has NUL or is too long."""


class NotOwnedError(AgentStoresError):
    """A mutating call by a principal that does not own the record."""


class FencedError(AgentStoresError):
    """A write carried an epoch below the highest one the key has seen."""

    @property
    def epoch(self) -> int | None:
        """The epoch the refused write carried."""
        return self.context.get("epoch")

    @property
    def fence(self) -> int | None:
        """The key's fence (highest epoch seen) that refused it."""
        return self.context.get("fence")


class LeaseLostError(AgentStoresError):
    """The lease is no longer held: the producer must stop.

    Raised as this class when the store refused the lease (a heartbeat, seal or write
    refused because a newer epoch took over, or the key was erased): ``__cause__`` is
    the refusal. A heartbeat that could not be confirmed raises the subclass
    :class:`HeartbeatTimeoutError` instead.
    """

    @property
    def epoch(self) -> int | None:
        """The epoch of the lease that was lost."""
        return self.context.get("epoch")


class HeartbeatTimeoutError(LeaseLostError):
    """The lease was given up because a heartbeat was not confirmed in time.

    The beat took longer than ``LeaseConfig.beat_timeout``, or the store failed it (for
    example unreachable). Nobody was seen taking over: the store may still show the row
    until it goes dead, but the producer can no longer prove it holds the lease, so it
    stops all the same. ``__cause__`` is the timeout or the store's error.
    """


class ContentionError(AgentStoresError):
    """Another caller got there first, and the call changed nothing.

    The common parent of :class:`BusyError`, :class:`StaleWriteError`,
    :class:`ConflictError` and :class:`AlreadyClaimedError`: each means "re-read and
    decide again", never "the backend failed". A fenced write is not contention: its
    producer must stop, not retry (:class:`FencedError`).
    """


class BusyError(ContentionError):
    """A live turn holds the conversation; ``occupant`` names its message id."""

    @property
    def occupant(self) -> str | None:
        """The message id of the turn that holds the conversation."""
        return self.context.get("occupant")

    @property
    def message_id(self) -> str | None:
        """Same as :attr:`occupant`."""
        return self.occupant


class StaleWriteError(ContentionError):
    """The transcript tail is not what the caller expected."""

    @property
    def tail(self) -> str | None:
        """The tail message id the store holds (``None``: empty transcript)."""
        return self.context.get("tail")

    @property
    def expected(self) -> str | None:
        """The tail message id the caller expected."""
        return self.context.get("expected")


class ConflictError(ContentionError):
    """A concurrent change won; the call changed nothing and may be retried."""


class NotFoundError(AgentStoresError, LookupError):
    """The record does not exist (or is invisible to this principal)."""


class ErasedError(NotFoundError):
    """The conversation was erased; its tombstone refuses late writes until ``until``."""

    @property
    def until(self) -> datetime | None:
        """When the tombstone lapses and the key takes writes again (UTC, store clock).

        The tombstone's erase time plus the backend's ``tombstone_ttl``; ``None`` only
        where the backend could not tell.
        """
        return self.context.get("until")


class ExpiredError(AgentStoresError):
    """The record exists but its expiry has passed on the store's clock."""


class AlreadyClaimedError(ContentionError):
    """A single-use token was already claimed (or abandoned)."""


class BackendUnavailableError(AgentStoresError):
    """The backend cannot be reached or is not set up for this adapter."""


class UnknownOutcomeError(BackendUnavailableError):
    """The request may or may not have taken effect (connection lost after send)."""


class UnsupportedError(AgentStoresError, NotImplementedError):
    """The backend does not offer this capability."""


class OAuthSecretError(AgentStoresError):
    """A stored secret cannot be decrypted: wrong or missing key, or moved between records."""


class EphemeralStoreWarning(UserWarning):
    """The process runs on the in-memory backend: nothing survives a restart."""


class Refusal(enum.Enum):
    """Why a store refused a call; :func:`refusal_error` gives each its typed error."""

    NOT_OWNED = "not_owned"
    FENCED = "fenced"
    ERASED = "erased"
    STALE_TAIL = "stale_tail"
    EXISTS = "exists"
    NOT_FOUND = "not_found"
    BUSY = "busy"
    EXPIRED = "expired"
    ALREADY_CLAIMED = "already_claimed"


ERASED_MESSAGE = (
    "the conversation was erased: its key refuses every write until its tombstone lapses "
    "(the backend's tombstone_ttl, 30 days unless configured); start a new session id"
)
"""What an erased key answers when the backend cannot tell when its tombstone lapses."""

ERASED_UNTIL_MESSAGE = (
    "the conversation was erased: its key refuses every write until {until} "
    "(when its tombstone lapses); start a new session id"
)
"""What an erased key answers, on every backend: until when, and what to do instead."""


def _as_utc(moment: datetime) -> datetime:
    """``moment`` as a timezone-aware UTC datetime (a naive one is taken as UTC)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _format_instant(moment: datetime) -> str:
    """``moment`` as ``2026-12-31T10:00:00Z``, rounded up to the second.

    Rounded up so that a key said to refuse writes "until" this instant really does.
    """
    moment = _as_utc(moment)
    if moment.microsecond:
        moment = moment.replace(microsecond=0) + timedelta(seconds=1)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


_ERROR_OF: dict[Refusal, type[AgentStoresError]] = {
    Refusal.NOT_OWNED: NotOwnedError,
    Refusal.FENCED: FencedError,
    Refusal.ERASED: ErasedError,
    Refusal.STALE_TAIL: StaleWriteError,
    Refusal.EXISTS: ConflictError,
    Refusal.NOT_FOUND: NotFoundError,
    Refusal.BUSY: BusyError,
    Refusal.EXPIRED: ExpiredError,
    Refusal.ALREADY_CLAIMED: AlreadyClaimedError,
}


def _default_message(refusal: Refusal, context: dict[str, Any]) -> str:
    if refusal is Refusal.NOT_OWNED:
        return "another principal owns this conversation"
    if refusal is Refusal.FENCED:
        return f"epoch {context.get('epoch')} is below the fence {context.get('fence')}"
    if refusal is Refusal.ERASED:
        until = context.get("until")
        if until is None:
            return ERASED_MESSAGE
        return ERASED_UNTIL_MESSAGE.format(until=_format_instant(until))
    if refusal is Refusal.STALE_TAIL:
        return f"transcript tail is {context.get('tail')!r}, expected {context.get('expected')!r}"
    if refusal is Refusal.EXISTS:
        return "the record already exists"
    if refusal is Refusal.NOT_FOUND:
        return "no such conversation"
    if refusal is Refusal.BUSY:
        return f"turn {context.get('occupant')!r} is running on this conversation"
    if refusal is Refusal.EXPIRED:
        return "the record expired"
    return "the token was already claimed or abandoned"


def refusal_error(refusal: Refusal, message: str = "", **context: Any) -> AgentStoresError:
    """The typed error for ``refusal``; ``message`` defaults to the standard wording.

    Context entries whose value is ``None`` are dropped, so ``error.context`` only holds
    what the store actually knew. ``until`` (a datetime: when an erased key's tombstone
    lapses) is normalised to UTC and named in the standard erased wording.
    """
    known = {name: value for name, value in context.items() if value is not None}
    if isinstance(known.get("until"), datetime):
        known["until"] = _as_utc(known["until"])
    return _ERROR_OF[refusal](message or _default_message(refusal, known), **known)


__all__ = [
    "AgentStoresError",
    "AlreadyClaimedError",
    "BackendUnavailableError",
    "BusyError",
    "ConflictError",
    "ContentionError",
    "EphemeralStoreWarning",
    "ErasedError",
    "ExpiredError",
    "FencedError",
    "HeartbeatTimeoutError",
    "InvalidKeyError",
    "LeaseLostError",
    "NotFoundError",
    "NotOwnedError",
    "OAuthSecretError",
    "Refusal",
    "StaleWriteError",
    "UnknownOutcomeError",
    "UnsupportedError",
    "UsageError",
    "refusal_error",
]
