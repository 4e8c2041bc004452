"""PyMongo errors -> agentstores errors, at the adapter edge."""

from __future__ import annotations

from pymongo import errors as px

from agentstores.errors import (
    AgentStoresError,
    BackendUnavailableError,
    UnknownOutcomeError,
    UsageError,
)


class LostReply(Exception):
    """A write was sent and its reply lost, and reading back could not tell whether it
    landed (the commit document moved on past its writer nonce)."""


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the server could not be reached or the reply was lost."""
    return isinstance(exc, (px.ConnectionFailure, px.ServerSelectionTimeoutError, OSError))


def maybe_sent(exc: BaseException) -> bool:
    """Whether a failed call may have reached the server: a lost connection or reply,
    not a failure to select a server or to get a pooled connection (nothing was sent)."""
    if isinstance(exc, (px.ServerSelectionTimeoutError, px.WaitQueueTimeoutError)):
        return False
    return is_connection_error(exc)


def translate_error(exc: Exception) -> AgentStoresError | None:
    """The typed error for a driver failure; ``None`` lets a real bug propagate unchanged.

    Connection failures before a write's commit point become ``BackendUnavailableError``
    (nothing was committed: readers ignore what the commit document does not cover); a
    reply lost after the commit was sent, that reading back could not settle, becomes
    ``UnknownOutcomeError``.
    """
    if isinstance(exc, LostReply):
        return UnknownOutcomeError(f"the write may or may not have been applied: {exc}")
    if isinstance(exc, px.WriteConcernError):
        return UnknownOutcomeError(
            f"applied on the primary but the write concern was not confirmed ({exc}); a "
            "failover may still undo it"
        )
    if isinstance(exc, px.WaitQueueTimeoutError):
        return BackendUnavailableError(f"no free MongoDB connection in the pool: {exc}")
    if isinstance(exc, px.ServerSelectionTimeoutError):
        return BackendUnavailableError(f"no MongoDB server could be selected: {exc}")
    if isinstance(exc, (px.ConnectionFailure, OSError)):
        return BackendUnavailableError(f"MongoDB unavailable: {exc}")
    if isinstance(exc, px.DocumentTooLarge):
        return UsageError(f"the record is too large for one MongoDB document: {exc}")
    if isinstance(exc, px.OperationFailure) and exc.code in (13, 18, 8000):
        return BackendUnavailableError(f"MongoDB refused the credentials or access: {exc}")
    return None


__all__ = ["LostReply", "is_connection_error", "maybe_sent", "translate_error"]
