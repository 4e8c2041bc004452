"""What every S3 store shares: the bundle's :class:`~.header.Root`, and the one way its
blocking boto3 calls run off the event loop (:func:`off_loop`) on a bounded pool."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections import deque
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


class Workers:
    """The bundle's threads for its blocking calls: at most ``limit``, started as calls
    need them, and the one that finished a call last takes the next.

    A call's thread marks itself idle *before* it hands the result to the event loop, so
    a task awaiting one call after another finds that same thread ready: no second thread
    is woken, and no thread waits for the GIL only to go to sleep again. (A
    ``ThreadPoolExecutor`` starts a new thread when a call comes before the last one's
    thread is back, so one task's calls ping-pong between two threads: in the CAS bench,
    32 tasks with a bundle each, that took 10 to 15 voluntary context switches per swap
    against the raw boto3 floor's 5 to 7, and this pool about 7.)
    Calls beyond ``limit`` wait their turn, in order. Threads are daemons: one still
    in a call when the interpreter exits (a bundle never closed) does not hold it up."""

    def __init__(self, limit: int, name: str) -> None:
        self.limit = limit
        self.name = name
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        """Idle workers, the one idle last at the end (it is handed the next call)."""
        self.waiting: deque[Callable[[], Callable[[], None]]] = deque()
        self.threads: list[threading.Thread] = []
        self.closed = False

    def submit(self, job: Callable[[], Callable[[], None]]) -> None:
        """Run ``job`` on a worker; it returns what reports its outcome, which the
        worker calls once it is idle again."""
        with self.lock:
            if self.closed:
                raise RuntimeError("this bundle's calls are stopped (it was closed)")
            if self.idle:
                self.idle.pop().hand(job)
                return
            if len(self.threads) >= self.limit:
                self.waiting.append(job)
                return
            worker = _Worker(self)
            thread = threading.Thread(
                target=worker.run,
                args=(job,),
                name=f"{self.name}_{len(self.threads)}",
                daemon=True,
            )
            self.threads.append(thread)
        thread.start()

    def _next(self, worker: _Worker) -> tuple[Callable[[], Callable[[], None]] | None, bool]:
        """The next waiting call, else ``(None, True)`` with ``worker`` now idle, or
        ``(None, False)`` once the pool is stopped (the worker ends)."""
        with self.lock:
            if self.waiting:
                return self.waiting.popleft(), False
            if self.closed:
                return None, False
            self.idle.append(worker)
            return None, True

    def shutdown(self) -> None:
        """Let running and waiting calls finish, then end every thread and join them."""
        with self.lock:
            self.closed = True
            idle, self.idle = self.idle, []
            threads = list(self.threads)
        for worker in idle:
            worker.hand(None)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()


class _Worker:
    __slots__ = ("job", "pool", "wake")

    def __init__(self, pool: Workers) -> None:
        self.pool = pool
        self.job: Callable[[], Callable[[], None]] | None = None
        self.wake = threading.Lock()
        self.wake.acquire()

    def hand(self, job: Callable[[], Callable[[], None]] | None) -> None:
        self.job = job
        self.wake.release()

    def run(self, job: Callable[[], Callable[[], None]] | None) -> None:
        while job is not None:
            report = job()
            job, idle = self.pool._next(self)
            report()  # after going idle: a task's next call comes back to this thread
            if idle:
                self.wake.acquire()
                job, self.job = self.job, None


def _deliver(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class Runner:
    """Runs blocking calls on the bundle's own bounded :class:`Workers` (made on first
    use)."""

    def __init__(
        self, workers: int, stats: RequestStats | None = None, concurrent: bool = True
    ) -> None:
        self.workers = workers
        self.stats = stats
        self.concurrent = concurrent
        """Whether a call sends requests that do not depend on each other together
        (``concurrent_requests``), or one after another."""
        self.pool: Workers | None = None
        self.reads: ThreadPoolExecutor | None = None
        self.lock = threading.Lock()

    def start(self) -> Workers:
        with self.lock:
            if self.pool is None:
                self.pool = Workers(self.workers, "agentstores-s3")
            return self.pool

    async def stop(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown)
        reads, self.reads = self.reads, None
        if reads is not None:
            await asyncio.to_thread(reads.shutdown, True)

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread. Cancelled before a worker took it, it never
        runs; once running, it runs to its end (its outcome is then dropped)."""
        pool = self.pool or self.start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def job() -> Callable[[], None]:
            if future.cancelled():
                return _nothing
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except BaseException as exc:
                outcome = (False, exc)

            def report() -> None:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it
                    loop.call_soon_threadsafe(_deliver, future, *outcome)

            return report

        pool.submit(job)
        return await future

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


def _nothing() -> None:
    pass


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


__all__ = ["DEFAULT_WORKERS", "Runner", "S3StoreBase", "Workers", "off_loop"]
