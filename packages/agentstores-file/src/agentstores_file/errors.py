"""OS errors -> agentstores errors, at the adapter edge."""

from __future__ import annotations

import errno

from agentstores.errors import AgentStoresError, BackendUnavailableError


def translate(exc: Exception) -> AgentStoresError | None:
    """OS errors become ``BackendUnavailableError`` (nothing was committed: the key lock
    raises ``UnknownOutcomeError`` itself once a rename has begun); a call on a closed
    bundle's pool is unavailable too. Anything else is a bug and propagates."""
    if isinstance(exc, OSError):
        name = errno.errorcode.get(exc.errno or 0, "OSError")
        return BackendUnavailableError(f"file store I/O failed ({name}): {exc}")
    if isinstance(exc, RuntimeError) and "shutdown" in str(exc):
        return BackendUnavailableError("the file store bundle is closed")
    return None


__all__ = ["translate"]
