"""What every store ABC shares: the adapter edge (error translation) and argument checks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from ..errors import AgentStoresError, UsageError
from ..keys import ConversationKey
from ..models import JSON, check_counter


class _Unset:
    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()
"""Marks an optional argument the caller did not pass (distinct from ``None``)."""


class StoreBase:
    """Shared edge of every store: adapters override :meth:`translate_error` only."""

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        """Map a driver exception to the typed hierarchy; ``None`` lets it propagate."""
        return None

    @asynccontextmanager
    async def edge(self, operation: str, key: ConversationKey | None = None) -> AsyncIterator[None]:
        """Run adapter code, translating driver errors and adding context."""
        try:
            yield
        except AgentStoresError:
            raise
        except Exception as exc:
            translated = self.translate_error(exc)
            if translated is None:
                raise
            translated.context.setdefault("operation", operation)
            if key is not None:
                translated.context.setdefault("key", key)
            raise translated from exc


def check_key(key: object) -> ConversationKey:
    if not isinstance(key, ConversationKey):
        raise UsageError(f"expected a ConversationKey, got {type(key).__name__}")
    return key


def check_epoch(epoch: object, *, optional: bool = True) -> int | None:
    if epoch is None and optional:
        return None
    return check_counter(epoch, "epoch")


def check_limit(limit: object, what: str = "limit", *, optional: bool = True) -> int | None:
    if limit is None and optional:
        return None
    return check_counter(limit, what)


def check_datetime(value: object, what: str, *, optional: bool = False) -> datetime | None:
    if value is None and optional:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise UsageError(f"{what} must be a timezone-aware datetime, got {value!r}")
    return value


def encode_json(value: JSON, what: str, max_bytes: int) -> bytes:
    """Canonical JSON bytes for ``value``; refuses what JSON cannot hold or what is too big."""
    try:
        data = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} is not JSON-serializable: {exc}") from exc
    raw = data.encode("utf-8")
    if len(raw) > max_bytes:
        raise UsageError(f"{what} is {len(raw)} bytes; the limit is {max_bytes}")
    return raw


def decode_json(raw: bytes | str) -> JSON:
    return json.loads(raw)
