"""Driver errors -> agentstores errors, at the adapter edge."""

from __future__ import annotations

from agentstores.errors import AgentStoresError


def translate_error(exc: Exception) -> AgentStoresError | None:
    """The typed error for a driver failure; ``None`` lets a real bug propagate unchanged.

    Map connection failures to ``BackendUnavailableError`` (nothing was applied) and a
    reply lost after sending a write to ``UnknownOutcomeError`` (it may have been).
    """
    return None


__all__ = ["translate_error"]
