"""The one typed error hierarchy. Adapters translate driver errors into these at their edge."""

from __future__ import annotations

from typing import Any


class AgentStoresError(Exception):
    """Base of every error this library raises on purpose.

    ``context`` carries what the caller needs to act (key, epoch, occupant...).
    """

    def __init__(self, message: str = "", **context: Any) -> None:
        super().__init__(message or self.__class__.__name__)
        self.context: dict[str, Any] = context


class UsageError(AgentStoresError, ValueError):
    """The call itself is wrong (bad argument combination, unknown option)."""


class InvalidKeyError(UsageError):
    """An id (tenant, session, principal, token, message) is empty, has NUL or is too long."""


class NotOwnedError(AgentStoresError, PermissionError):
    """A mutating call by a principal that does not own the record."""


class FencedError(AgentStoresError):
    """A write carried an epoch below the highest one the key has seen."""

    @property
    def epoch(self) -> int | None:
        return self.context.get("epoch")

    @property
    def fence(self) -> int | None:
        return self.context.get("fence")


class BusyError(AgentStoresError):
    """A live turn holds the conversation; ``message_id`` names the occupant."""

    @property
    def message_id(self) -> str | None:
        return self.context.get("message_id")


class StaleWriteError(AgentStoresError):
    """The transcript tail is not what the caller expected."""


class ConflictError(AgentStoresError):
    """A concurrent change won; the call changed nothing and may be retried."""


class NotFoundError(AgentStoresError, LookupError):
    """The record does not exist (or is invisible to this principal)."""


class ErasedError(NotFoundError):
    """The conversation was erased; its tombstone refuses late writes."""


class ExpiredError(AgentStoresError):
    """The record exists but its expiry has passed on the store's clock."""


class AlreadyClaimedError(AgentStoresError):
    """A single-use token was already claimed (or abandoned)."""


class BackendUnavailableError(AgentStoresError, ConnectionError):
    """The backend cannot be reached or is not set up for this adapter."""


class UnknownOutcomeError(BackendUnavailableError):
    """The request may or may not have taken effect (connection lost after send)."""


class UnsupportedError(AgentStoresError, NotImplementedError):
    """The backend does not offer this capability."""


__all__ = [
    "AgentStoresError",
    "AlreadyClaimedError",
    "BackendUnavailableError",
    "BusyError",
    "ConflictError",
    "ErasedError",
    "ExpiredError",
    "FencedError",
    "InvalidKeyError",
    "NotFoundError",
    "NotOwnedError",
    "StaleWriteError",
    "UnknownOutcomeError",
    "UnsupportedError",
    "UsageError",
]
