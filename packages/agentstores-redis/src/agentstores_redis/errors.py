"""Redis errors -> agentstores errors, at the adapter edge."""

from __future__ import annotations

from redis.exceptions import ResponseError

from agentstores.errors import (
    AgentStoresError,
    BackendUnavailableError,
    UnknownOutcomeError,
    UsageError,
)
from redis import exceptions as rx

from .client import NotDurable, NotSent, Uncertain, Unencodable, refused_before_run


def translate(exc: Exception) -> AgentStoresError | None:
    """The typed error for a driver failure; None lets a real bug propagate unchanged."""
    if isinstance(exc, Unencodable):
        return UsageError(f"{exc}; nothing was sent")
    if isinstance(exc, NotSent):
        return BackendUnavailableError(str(exc), exhausted=exc.exhausted)
    if isinstance(exc, Uncertain):
        return UnknownOutcomeError(
            f"{exc}; the write may or may not have been applied", cause=type(exc).__name__
        )
    if isinstance(exc, NotDurable):
        return UnknownOutcomeError(
            f"applied on the primary but not confirmed durable ({exc}); a failover or "
            "crash may still undo it"
        )
    if isinstance(exc, (rx.ConnectionError, rx.TimeoutError, OSError)):
        return BackendUnavailableError(f"redis unavailable: {exc}")
    if isinstance(exc, (rx.ClusterError, rx.RedisClusterException)):
        return BackendUnavailableError(f"redis cluster unavailable: {exc}")
    if isinstance(exc, ResponseError) and refused_before_run(exc):
        return BackendUnavailableError(f"redis refused the command: {exc}")
    return None


__all__ = ["translate"]
