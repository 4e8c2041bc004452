"""Registers the built-in ``memory://`` backend."""

from __future__ import annotations

from ..plugins import BackendInfo, hookimpl


@hookimpl
def agentstores_backends() -> list[BackendInfo]:
    return [
        BackendInfo(
            name="memory",
            schemes=("memory",),
            factory="agentstores.memory.stores:MemoryStores",
            capabilities=frozenset({"settable_clock"}),
            distribution="agentstores",
            description="In-process reference backend; nothing survives a restart.",
            durability="none: every write is lost when the process exits",
            bench_floor="agentstores.bench.floor:MemoryFloor",
        )
    ]
