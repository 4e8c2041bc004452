"""asyncpg errors -> agentstores errors, at the adapter edge.

The server-side functions raise SQLSTATEs of class ``AS`` for contract outcomes; those
map one to one onto the typed hierarchy. Connection failures are split in two: an error
before a request was sent means nothing happened (:func:`is_connection_loss` is False
for those), while a connection lost after sending leaves the outcome unknown and goes
through reconciliation (``database.Database.write``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentstores.errors import (
    AgentStoresError,
    AlreadyClaimedError,
    BackendUnavailableError,
    ConflictError,
    ErasedError,
    ExpiredError,
    FencedError,
    NotFoundError,
    NotOwnedError,
    StaleWriteError,
    UsageError,
)

_CONNECTION_SQLSTATE_CLASSES = ("08",)
"""Connection exceptions."""
_SHUTDOWN_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "57P05"})
"""admin_shutdown, crash_shutdown, cannot_connect_now, idle_session_timeout."""
_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01", "55P03"})
"""serialization_failure, deadlock_detected, lock_not_available."""
_SCHEMA_SQLSTATES = frozenset({"3F000", "42P01", "42883", "42501", "42703"})
"""invalid_schema_name, undefined_table, undefined_function, insufficient_privilege,
undefined_column: the schema is missing, older, or not granted."""


def sqlstate(exc: BaseException) -> str | None:
    code = getattr(exc, "sqlstate", None)
    return code if isinstance(code, str) else None


def is_connection_loss(exc: BaseException) -> bool:
    """True when the connection broke while a request may have been in flight."""
    import asyncpg

    if isinstance(exc, AgentStoresError):
        return False  # ours (NotOwnedError is a PermissionError, hence an OSError)
    if isinstance(exc, asyncpg.exceptions.ConnectionDoesNotExistError):
        return True
    code = sqlstate(exc)
    if code is not None:
        return code[:2] in _CONNECTION_SQLSTATE_CLASSES or code in _SHUTDOWN_SQLSTATES
    if isinstance(exc, asyncpg.InterfaceError):
        return False
    return isinstance(exc, (OSError, ConnectionError, asyncio.IncompleteReadError, TimeoutError))


def _detail(exc: BaseException) -> str:
    value = getattr(exc, "detail", None)
    return value if isinstance(value, str) else ""


def _message(exc: BaseException) -> str:
    value = getattr(exc, "message", None)
    return value if isinstance(value, str) and value else str(exc)


def translate(exc: BaseException) -> AgentStoresError | None:
    """The typed error for ``exc``, or None to let it propagate."""
    import asyncpg

    code = sqlstate(exc)
    message = _message(exc)
    if code is not None and code.startswith("AS"):
        detail = _detail(exc)
        if code == "ASNOW":
            return NotOwnedError(message)
        if code == "ASERA":
            return ErasedError(message)
        if code == "ASFEN":
            context: dict[str, Any] = {}
            if detail.isdigit():
                context["fence"] = int(detail)
            return FencedError(message, **context)
        if code == "ASNFD":
            return NotFoundError(message)
        if code == "ASSTA":
            return StaleWriteError(message, tail=detail[1:] if detail else None)
        if code == "ASCON":
            return ConflictError(message)
        if code == "ASEXP":
            return ExpiredError(message)
        if code == "ASCLM":
            return AlreadyClaimedError(message, status=detail or None)
        return None
    if code in _RETRYABLE_SQLSTATES:
        return ConflictError(f"a concurrent change won ({message}); retry", sqlstate=code)
    if code in _SCHEMA_SQLSTATES:
        return BackendUnavailableError(
            f"the agentstores schema is missing, older, or not granted to this role "
            f"({message}); run `agentstores schema install`",
            sqlstate=code,
        )
    if code is not None and code.startswith("22"):
        return UsageError(f"PostgreSQL refused a value: {message}", sqlstate=code)
    if code == "57014":
        return BackendUnavailableError(f"statement cancelled by the server: {message}")
    if code is not None and code[:2] == "53":
        return BackendUnavailableError(f"PostgreSQL is out of resources: {message}", sqlstate=code)
    if is_connection_loss(exc) or isinstance(exc, asyncpg.PostgresConnectionError):
        return BackendUnavailableError(f"PostgreSQL connection failed: {message}", sqlstate=code)
    if isinstance(
        exc,
        (
            OSError,
            ConnectionError,
            TimeoutError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
        ),
    ):
        return BackendUnavailableError(f"PostgreSQL unreachable: {exc}")
    if isinstance(exc, asyncpg.PostgresError):
        return AgentStoresError(f"unexpected PostgreSQL error {code}: {message}", sqlstate=code)
    return None
