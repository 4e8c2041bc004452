"""Every refusal as a JSON error, decided in one place.

A body is ``{"error": {"code": ..., "message": ..., ...}}``. A principal that cannot see a
conversation is told "not found", exactly as for an absent one: ``NotOwnedError`` is 403
only when the caller can already see the conversation (a principal it is shared with).
Unexpected and backend failures say nothing about the backend (no URL, no driver text).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

from agentstores.errors import (
    AgentStoresError,
    BackendUnavailableError,
    BusyError,
    ConflictError,
    ErasedError,
    ExpiredError,
    NotFoundError,
    NotOwnedError,
    StaleWriteError,
    UnsupportedError,
    UsageError,
)

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A refusal with its HTTP status, code and extra body fields."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def response(self) -> JSONResponse:
        """The JSON response for this refusal."""
        body = {"error": {"code": self.code, "message": self.message, **self.extra}}
        return JSONResponse(body, status_code=self.status)


def invalid(message: str) -> ApiError:
    """400 ``invalid``: the request itself is wrong."""
    return ApiError(400, "invalid", message)


def not_found() -> ApiError:
    """404 ``not_found``: absent, or not visible to the caller (the same answer)."""
    return ApiError(404, "not_found", "no such conversation")


UNAUTHENTICATED = ApiError(401, "unauthenticated", "no identity for this request")


def api_error(exc: BaseException, *, visible: bool = False) -> ApiError:
    """The refusal for a typed error; ``visible``: the caller can see the conversation."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BusyError):
        turn = {"message_id": exc.occupant, "epoch": exc.context.get("epoch")}
        return ApiError(409, "busy", "another turn is running on this conversation", turn=turn)
    if isinstance(exc, StaleWriteError):
        return ApiError(
            409,
            "stale",
            "the conversation moved on: its last message is not the one expected",
            tail=exc.tail,
            expected=exc.expected,
        )
    if isinstance(exc, ConflictError):
        return ApiError(409, "conflict", "a concurrent change won; retry")
    if isinstance(exc, ErasedError):
        return ApiError(410, "erased", "the conversation was erased")
    if isinstance(exc, NotFoundError | ExpiredError):
        return not_found()
    if isinstance(exc, NotOwnedError):
        if visible:
            return ApiError(403, "forbidden", "only the owner may change this conversation")
        return not_found()
    if isinstance(exc, UsageError):
        return invalid(str(exc))
    if isinstance(exc, BackendUnavailableError):
        log.warning("backend unavailable: %s", type(exc).__name__)
        return ApiError(503, "unavailable", "the store is unavailable; retry later")
    if isinstance(exc, UnsupportedError):
        return ApiError(501, "unsupported", "this backend does not offer that")
    if isinstance(exc, AgentStoresError):
        log.error("unexpected store refusal: %s", type(exc).__name__)
    else:
        log.error("unexpected error", exc_info=exc)
    return ApiError(500, "internal", "internal error")


__all__ = ["UNAUTHENTICATED", "ApiError", "api_error", "invalid", "not_found"]
