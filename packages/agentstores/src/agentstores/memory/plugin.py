"""Registers the built-in ``memory://`` backend."""

from __future__ import annotations

from ..capabilities import Capability
from ..plugins import BackendInfo, hookimpl

BACKEND = BackendInfo(
    name="memory",
    schemes=("memory",),
    factory="agentstores.memory.stores:MemoryStores",
    capabilities=frozenset({Capability.SETTABLE_CLOCK}),
    distribution="agentstores",
    description="In-process reference backend; nothing survives a restart.",
    durability="none: every write is lost when the process exits",
)
"""The one declaration of this backend; ``MemoryStores`` reads its capabilities here."""


@hookimpl
def agentstores_backends() -> list[BackendInfo]:
    """The built-in memory backend."""
    return [BACKEND]
