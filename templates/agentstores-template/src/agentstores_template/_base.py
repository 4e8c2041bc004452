"""What every template store shares: the bundle's context and the error edge."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from agentstores.errors import AgentStoresError
from agentstores.stores.kit import DEFAULT_TOMBSTONE_TTL

from .errors import translate_error


@dataclass
class Context:
    """Shared by the stores of one bundle: put the driver's client or pool here."""

    url: str
    tombstone_ttl: timedelta = DEFAULT_TOMBSTONE_TTL
    """How long an erased key refuses late writes (the suite shortens it)."""


class TemplateStoreBase:
    """Mixin for every template store: the shared context and error translation."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        return translate_error(exc)


__all__ = ["Context", "TemplateStoreBase"]
