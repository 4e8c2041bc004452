"""What every S3 store shares: the bundle's :class:`~.header.Root`, and the one way its
blocking boto3 calls run off the event loop (:func:`off_loop`) on a bounded pool."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Concatenate, ParamSpec, TypeVar

from agentstores.errors import AgentStoresError

from .client import RequestStats, grouped
from .errors import translate
from .header import Root

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="S3StoreBase")

DEFAULT_WORKERS = 32
"""Threads (and HTTP connections) of a bundle's pool, unless ``workers`` says otherwise."""
READERS = 8
"""Threads a bundle uses to send the requests of one call together (the message objects
of one read, or an append's header read beside its id checks and copy-outs)."""


class Runner:
    """Runs blocking calls on the bundle's own bounded pool (made on first use)."""

    def __init__(
        self, workers: int, stats: RequestStats | None = None, concurrent: bool = False
    ) -> None:
        self.workers = workers
        self.stats = stats
        self.concurrent = concurrent
        """Whether a call sends requests that do not depend on each other together
        (``concurrent_requests``), or one after another."""
        self.pool: ThreadPoolExecutor | None = None
        self.reads: ThreadPoolExecutor | None = None
        self.lock = threading.Lock()

    def start(self) -> ThreadPoolExecutor:
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="agentstores-s3")
        return self.pool

    async def stop(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True)
        reads, self.reads = self.reads, None
        if reads is not None:
            await asyncio.to_thread(reads.shutdown, True)

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        pool = self.pool or self.start()
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def _requests(self) -> ThreadPoolExecutor:
        with self.lock:
            if self.reads is None:
                self.reads = ThreadPoolExecutor(READERS, thread_name_prefix="agentstores-s3-r")
            return self.reads

    def _rounds(self, n: int) -> None:
        if self.stats is not None:
            self.stats.count("rounds", n)

    def map(self, fn: Callable[[Any], T], items: list[Any]) -> list[T]:
        """``fn`` over ``items``, called from a pool thread: several GETs at once on a
        small pool of its own (single requests; they never call ``map`` again)."""
        if len(items) <= 1:
            return [fn(item) for item in items]
        self._rounds(-(-len(items) // READERS))
        return list(self._requests().map(lambda item: grouped(lambda: fn(item))(), items))

    def together(self, calls: list[Callable[[], Any]]) -> list[Future[Any]]:
        """Send ``calls`` (each a single request) at once, and return when every one has
        ended, so none is still in flight: their futures, each holding its result or
        exception. One round per :data:`READERS` calls (without ``concurrent``: one after
        another, a round each)."""
        if not calls:
            return []
        if not self.concurrent:
            return [_ran(call) for call in calls]
        self._rounds(-(-len(calls) // READERS))
        pool = self._requests()
        futures = [pool.submit(grouped(call)) for call in calls]
        wait(futures)
        return futures


def _ran(call: Callable[[], Any]) -> Future[Any]:
    """``call`` run here, as a finished future."""
    future: Future[Any] = Future()
    try:
        future.set_result(call())
    except Exception as exc:
        future.set_exception(exc)
    return future


def off_loop(
    method: Callable[Concatenate[S, P], T],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """Make a store's blocking storage method the async method its ABC declares."""

    async def on_pool(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if kwargs:
            return await self.runner(functools.partial(method, self, *args, **kwargs))
        return await self.runner(method, self, *args)

    functools.update_wrapper(on_pool, method)
    return on_pool


class S3StoreBase:
    """The mixin of every S3 store: the bundle's root and runner, and the botocore-error
    translation at the edge."""

    def __init__(self, root: Root, runner: Runner) -> None:
        self.root = root
        self.runner = runner

    def translate_error(self, exc: Exception) -> AgentStoresError | None:
        return translate(exc)


__all__ = ["DEFAULT_WORKERS", "Runner", "S3StoreBase", "off_loop"]
