"""asyncpg errors -> agentstores errors, at the adapter edge.

The server-side functions raise SQLSTATEs of class ``AS`` for contract outcomes; each
names one :class:`~agentstores.errors.Refusal`, turned into its typed error by
:func:`~agentstores.errors.refusal_error` with what the server sent back (the fence, the
tail, a token's status) and what the call knows (the epoch it carried, the tail it
expected: see :func:`translate_refusal`). Connection failures are split in two: an error
before a request was sent means nothing happened (:func:`is_connection_loss` is False
for those), while a connection lost after sending leaves the outcome unknown and goes
through reconciliation (``database.Database.write``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentstores.errors import (
    AgentStoresError,
    BackendUnavailableError,
    ConflictError,
    Refusal,
    UsageError,
    refusal_error,
)
from agentstores.stores.conversation_metadata import over_limit

REFUSALS: dict[str, Refusal] = {
    "ASNOW": Refusal.NOT_OWNED,
    "ASERA": Refusal.ERASED,
    "ASFEN": Refusal.FENCED,
    "ASNFD": Refusal.NOT_FOUND,
    "ASSTA": Refusal.STALE_TAIL,
    "ASCON": Refusal.EXISTS,
    "ASEXP": Refusal.EXPIRED,
    "ASCLM": Refusal.ALREADY_CLAIMED,
}
"""The SQLSTATEs the server-side functions raise, and the refusal each one means."""
TOO_BIG = "ASBIG"
"""Raised when a merge would grow the conversation metadata past its limit (DETAIL: the
size it would have): the caller's error, a UsageError."""

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

    if isinstance(exc, asyncpg.exceptions.ConnectionDoesNotExistError):
        return True
    code = sqlstate(exc)
    if code is not None:
        return code[:2] in _CONNECTION_SQLSTATE_CLASSES or code in _SHUTDOWN_SQLSTATES
    if isinstance(exc, asyncpg.InterfaceError):
        return False
    return isinstance(exc, (OSError, asyncio.IncompleteReadError, TimeoutError))


def _detail(exc: BaseException) -> str:
    value = getattr(exc, "detail", None)
    return value if isinstance(value, str) else ""


def _message(exc: BaseException) -> str:
    value = getattr(exc, "message", None)
    return value if isinstance(value, str) and value else str(exc)


def _sent_back(reason: Refusal, detail: str) -> dict[str, Any]:
    """What the server put in DETAIL: the fence, ``=`` and the tail, a token's status."""
    if reason is Refusal.FENCED:
        return {"fence": int(detail)} if detail.isdigit() else {}
    if reason is Refusal.STALE_TAIL:
        return {"tail": detail[1:] if detail else None}
    if reason is Refusal.ALREADY_CLAIMED:
        return {"status": detail or None}
    return {}


def translate_refusal(exc: BaseException, **call: Any) -> AgentStoresError | None:
    """The typed error for a refusal the server-side functions raised, else None.

    ``call`` is what the call itself knows and the server does not send back: ``key``,
    the ``epoch`` the write carried, the tail it ``expected``.
    """
    code = sqlstate(exc)
    if code == TOO_BIG:
        detail = _detail(exc)
        return over_limit(int(detail) if detail.isdigit() else None)
    reason = REFUSALS.get(code) if code is not None else None
    if reason is None:
        return None
    # An erased key answers in the library's one wording (it says for how long, and
    # what to do); the other refusals keep the server's message, which names the detail.
    message = "" if reason is Refusal.ERASED else _message(exc)
    return refusal_error(reason, message, **_sent_back(reason, _detail(exc)), **call)


def translate(exc: BaseException) -> AgentStoresError | None:
    """The typed error for ``exc``, or None to let it propagate."""
    import asyncpg

    code = sqlstate(exc)
    message = _message(exc)
    if code is not None and code.startswith("AS"):
        return translate_refusal(exc)
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
            TimeoutError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
        ),
    ):
        return BackendUnavailableError(f"PostgreSQL unreachable: {exc}")
    if isinstance(exc, asyncpg.PostgresError):
        return AgentStoresError(f"unexpected PostgreSQL error {code}: {message}", sqlstate=code)
    return None
