"""Reading requests defensively: capped JSON bodies, ids and query numbers, each refused
with 400 ``invalid`` and a message saying which."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from agentstores.errors import UsageError
from agentstores.keys import validate_id, validate_principal

from .errors import invalid


async def json_body(request: Request, limit: int) -> dict[str, Any]:
    """The request's JSON object, read up to ``limit`` bytes (more is refused unread)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise invalid(f"the request body is over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise invalid(f"the request body is over {limit} bytes")
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError):
        raise invalid("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    return body


def an_id(value: object, what: str) -> str:
    """A tenant, conversation or message id (non-empty, no NUL, at most 256 bytes)."""
    try:
        return validate_id(value, what)
    except UsageError as exc:
        raise invalid(str(exc)) from None


def a_principal(value: object) -> str:
    """A principal id."""
    try:
        return validate_principal(value)
    except UsageError as exc:
        raise invalid(str(exc)) from None


def optional_str(body: dict[str, Any], name: str) -> str | None:
    """``body[name]`` when it is a string, None when absent or null."""
    value = body.get(name)
    if value is None or isinstance(value, str):
        return value
    raise invalid(f"{name} must be a string or null")


def query_int(
    request: Request, name: str, default: int | None, *, low: int = 0, high: int = 2**62
) -> int | None:
    """The query parameter ``name`` as an int in ``low..high`` (``default`` when absent)."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise invalid(f"{name} must be an integer") from None
    if not low <= value <= high:
        raise invalid(f"{name} must be between {low} and {high}")
    return value


__all__ = ["a_principal", "an_id", "json_body", "optional_str", "query_int"]
