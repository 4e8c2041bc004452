"""Running async store calls from synchronous tests, and opening bundles for racing clients."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from agentstores.stores import Capability, Stores

from . import not_implemented
from .backend import BackendUnderTest

T = TypeVar("T")


def run(backend: BackendUnderTest, body: Callable[[Stores], Awaitable[T]]) -> T:
    """Open one bundle on a fresh event loop, run ``body(stores)``, close it."""

    async def main() -> T:
        async with backend.open() as stores:
            return await body(stores)

    return asyncio.run(main())


@asynccontextmanager
async def clients(backend: BackendUnderTest, stores: Stores, n: int) -> AsyncIterator[list[Stores]]:
    """``n`` bundles for racing clients: each its own connection where the backend is
    multi-process (so the race crosses connections), else the one shared bundle."""
    if not backend.has(Capability.MULTI_PROCESS):
        yield [stores] * n
        return
    async with AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(backend.open()) for _ in range(n)]
        yield opened


async def race(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Outcome]:
    """Start every call at once (behind a barrier) and collect each one's outcome."""
    gate = asyncio.Event()
    ready = 0

    async def one(call: Callable[[], Awaitable[Any]]) -> Outcome:
        nonlocal ready
        ready += 1
        if ready == len(calls):
            gate.set()
        await gate.wait()
        return await capture(call())

    return list(await asyncio.gather(*(one(c) for c in calls)))


@dataclass(frozen=True)
class Outcome:
    """What a call gave: a value, or the error it raised."""

    value: Any = None
    error: BaseException | None = None
    invoked: int = 0
    completed: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def describe(self) -> str:
        if self.error is not None:
            return f"{type(self.error).__name__}({self.error})"
        return repr(self.value)


async def capture(awaitable: Awaitable[Any]) -> Outcome:
    """Await and record the value or the ``Exception`` raised, with monotonic times (ns)."""
    invoked = time.perf_counter_ns()
    try:
        value = await awaitable
    except Exception as exc:
        not_implemented.note(exc)
        return Outcome(error=exc, invoked=invoked, completed=time.perf_counter_ns())
    return Outcome(value=value, invoked=invoked, completed=time.perf_counter_ns())


def capture_sync(fn: Callable[[], T]) -> Outcome:
    try:
        return Outcome(value=fn())
    except Exception as exc:
        not_implemented.note(exc)
        return Outcome(error=exc)
