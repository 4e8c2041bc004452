"""The threads a bundle runs its blocking boto3 calls on (``Runner`` over ``Workers``):
one task's calls in turn stay on one thread, concurrent calls get threads up to the
limit and wait beyond it, outcomes and exceptions come back to the caller, a call
cancelled before it started never runs, and closing ends every thread. No server."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agentstores_s3._base import Runner


async def test_one_task_calls_in_turn_run_on_one_thread() -> None:
    runner = Runner(32)
    try:
        seen = {await runner(threading.get_ident) for _ in range(200)}
        # A ThreadPoolExecutor starts a second thread when a call comes before the last
        # one's thread is back, and the calls then alternate between the two.
        assert len(seen) == 1, f"200 calls in turn ran on {len(seen)} threads"
        assert runner.pool is not None and len(runner.pool.threads) == 1
    finally:
        await runner.stop()


async def test_concurrent_calls_run_together_up_to_the_limit_then_wait() -> None:
    runner = Runner(4)
    barrier = threading.Barrier(4, timeout=10)
    running = 0
    most = 0
    lock = threading.Lock()

    def call(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        if n < 4:
            barrier.wait()  # only passes when four calls run at once
        time.sleep(0.01)
        with lock:
            running -= 1
        return n * n

    try:
        results = await asyncio.gather(*(runner(call, n) for n in range(12)))
        assert results == [n * n for n in range(12)]
        assert most == 4
        assert runner.pool is not None and len(runner.pool.threads) == 4
    finally:
        await runner.stop()


async def test_an_exception_reaches_the_caller_with_its_type() -> None:
    runner = Runner(2)

    def fail() -> None:
        raise KeyError("nope")

    try:
        with pytest.raises(KeyError, match="nope"):
            await runner(fail)
        assert await runner(lambda: 7) == 7  # the thread lives on
    finally:
        await runner.stop()


async def test_a_call_cancelled_before_a_thread_took_it_never_runs() -> None:
    runner = Runner(1)
    release = threading.Event()
    ran: list[str] = []

    def block() -> None:
        release.wait(10)
        ran.append("first")

    try:
        first = asyncio.ensure_future(runner(block))
        await asyncio.sleep(0.05)  # the only thread is in ``block``
        second = asyncio.ensure_future(runner(ran.append, "second"))
        await asyncio.sleep(0.05)
        second.cancel()
        release.set()
        await first
        with pytest.raises(asyncio.CancelledError):
            await second
        assert await runner(ran.append, "third") is None
        assert ran == ["first", "third"]
    finally:
        await runner.stop()


async def test_stop_ends_every_thread_and_a_later_call_starts_afresh() -> None:
    runner = Runner(8)
    # Each call waits until all eight run: none can finish and be reused early, however
    # slowly the event loop hands the calls out on a busy machine.
    everyone = threading.Barrier(8)
    await asyncio.gather(*(runner(everyone.wait, 30) for _ in range(8)))
    pool = runner.pool
    assert pool is not None and len(pool.threads) == 8
    await runner.stop()
    assert not any(t.is_alive() for t in pool.threads)
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(lambda: lambda: None)
    assert await runner(lambda: "again") == "again"
    await runner.stop()
