"""What every file store shares: the root it stores under, and the one way its blocking
storage code runs off the event loop (:func:`off_loop`)."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from agentstores.errors import AgentStoresError

from .errors import translate
from .header import FileRoot

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="FileStoreBase")

DEFAULT_WORKERS = 32
"""Threads of the process-wide pool where blocking file calls (flock waits, fsync) run.
One pool for every bundle of a process, so many bundles do not multiply threads."""

_shared: ThreadPoolExecutor | None = None
_shared_lock = threading.Lock()


def _forget_shared() -> None:
    global _shared
    _shared = None


# A pool's threads do not survive into a forked child: the child makes its own.
os.register_at_fork(after_in_child=_forget_shared)


def shared_pool() -> ThreadPoolExecutor:
    """The process-wide pool every bundle without ``workers`` uses (made anew after a
    fork). Once made, no lock and no system call: this is on every store call."""
    global _shared
    pool = _shared
    if pool is not None:
        return pool
    with _shared_lock:
        if _shared is None:
            _shared = ThreadPoolExecutor(DEFAULT_WORKERS, thread_name_prefix="agentstores-file")
        return _shared


class Runner:
    """Runs blocking calls off the event loop: on the shared pool, or on a pool of the
    bundle's own when it asked for ``workers``."""

    def __init__(self, workers: int | None) -> None:
        self.workers = workers
        self.pool: ThreadPoolExecutor | None = None

    def start(self) -> None:
        if self.pool is None and self.workers is not None:
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="agentstores-file")

    async def stop(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True)

    def executor(self) -> ThreadPoolExecutor:
        """The pool calls run on now (the bundle's own, started on first use, or the
        process-wide one)."""
        pool = self.pool
        if pool is not None:
            return pool
        if self.workers is not None:
            self.start()
            assert self.pool is not None
            return self.pool
        return shared_pool()

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor(), fn, *args)


def off_loop(
    method: Callable[Concatenate[S, P], T],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """Make a store's blocking storage method the async method its ABC declares: each
    call runs on the bundle's pool, so flock waits and fsyncs never block the loop."""

    async def on_pool(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        # The executor future is awaited here directly: no coroutine of the runner's in
        # between, on every call of every store.
        pool = self.runner.executor()
        if kwargs:
            fn = functools.partial(method, self, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(pool, fn)
        return await asyncio.get_running_loop().run_in_executor(pool, method, self, *args)

    functools.update_wrapper(on_pool, method)
    return on_pool


class FileStoreBase:
    """The mixin of every file store: the bundle's root and runner, and the OS-error
    translation at the edge."""

    def __init__(self, root: FileRoot, runner: Runner) -> None:
        self.root = root
        self.runner = runner

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        return translate(exc)


__all__ = ["DEFAULT_WORKERS", "FileStoreBase", "Runner", "off_loop", "shared_pool"]
