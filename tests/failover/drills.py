"""The drill registry: each drill names a backend configuration and how to start it.

A drill is a function taking no arguments and returning an async context manager that
starts the servers and yields a :class:`Target`: the URL clients open and the fault to
inject mid-run. :data:`DRILLS` maps each drill's name to ``"module:function"``, imported
only when the drill runs (so one backend's servers need not be installed for another's).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from .checks import Counts, count, read_back
from .workload import Config, Fault, run_workload


@dataclass(frozen=True)
class Target:
    """A running backend configuration: its URL, the fault, and a line for the table."""

    url: str
    fault: Fault
    description: str


DRILLS: dict[str, str] = {
    "postgres-async": "tests.failover.postgres:async_drill",
    "postgres-sync": "tests.failover.postgres:sync_drill",
    "postgres-remote-apply": "tests.failover.postgres:remote_apply_drill",
    "postgres-async-link": "tests.failover.postgres:async_link_drill",
    "postgres-sync-link": "tests.failover.postgres:sync_link_drill",
    "redis-async": "tests.failover.redis:async_drill",
    "redis-wait": "tests.failover.redis:wait_drill",
    "redis-waitaof": "tests.failover.redis:waitaof_drill",
    "redis-async-far": "tests.failover.redis:async_far_drill",
    "redis-wait-far": "tests.failover.redis:wait_far_drill",
}
"""Every drill, by name: ``"module:function"`` (see the module docstring)."""


def drill_factory(name: str) -> Callable[[], AbstractAsyncContextManager[Target]]:
    """The function that starts drill ``name``'s servers."""
    if name not in DRILLS:
        raise ValueError(f"unknown drill {name!r}; known: {', '.join(sorted(DRILLS))}")
    module, _, function = DRILLS[name].partition(":")
    factory: Callable[[], AbstractAsyncContextManager[Target]] = getattr(
        importlib.import_module(module), function
    )
    return factory


async def run_once(name: str, config: Config | None = None) -> tuple[Counts, dict[str, Any]]:
    """Start drill ``name``, run the workload with its fault, read back and count."""
    async with drill_factory(name)() as target:
        result = await run_workload(target.url, target.fault, config)
        finals = await read_back(target.url, result)
        counts = count(result, finals)
        info = {
            "description": target.description,
            "fault": result.fault,
            "acked_after_fault": result.acked_after_fault(),
            "workers_failed": result.workers_failed,
        }
        return counts, info
