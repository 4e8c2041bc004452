"""``settled``: a cancelled caller hears the cancellation only once its write ended."""

from __future__ import annotations

import asyncio

import pytest

from agentstores.protocol import settled


async def _write(
    log: list[str], gate: asyncio.Event, fail: bool = False, started: asyncio.Event | None = None
) -> str:
    log.append("started")
    if started is not None:
        started.set()
    await gate.wait()
    if fail:
        raise ValueError("the write failed")
    log.append("landed")
    return "done"


async def test_a_write_returns_its_result() -> None:
    gate = asyncio.Event()
    gate.set()
    assert await settled(_write([], gate)) == "done"


async def test_a_write_error_reaches_the_caller() -> None:
    gate = asyncio.Event()
    gate.set()
    with pytest.raises(ValueError, match="failed"):
        await settled(_write([], gate, fail=True))


async def test_a_cancelled_caller_waits_for_the_write_then_hears_the_cancellation() -> None:
    log: list[str] = []
    gate = asyncio.Event()
    started = asyncio.Event()
    caller = asyncio.create_task(settled(_write(log, gate, started=started)))
    await started.wait()
    caller.cancel()
    await asyncio.sleep(0.01)
    assert not caller.done(), "the caller ended before its write did"
    caller.cancel()  # a second cancellation changes nothing either
    await asyncio.sleep(0.01)
    assert not caller.done()
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert log == ["started", "landed"], "the write did not finish"


async def test_a_cancelled_caller_of_a_failed_write_hears_the_cancellation() -> None:
    gate = asyncio.Event()
    started = asyncio.Event()
    caller = asyncio.create_task(settled(_write([], gate, fail=True, started=started)))
    await started.wait()
    caller.cancel()
    await asyncio.sleep(0)
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_the_write_keeps_its_own_timeouts() -> None:
    """The caller's cancellation is held back; the write's own ``asyncio.timeout`` (a
    driver's request deadline) still cancels the write's task and fires."""

    async def slow_request() -> str:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(10)
        return "never"

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(settled(slow_request()), 5)


async def test_a_caller_timeout_fires_once_the_write_ended() -> None:
    log: list[str] = []
    gate = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, gate.set)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await settled(_write(log, gate))
    assert log == ["started", "landed"], "the caller's timeout fired before the write ended"


async def test_a_write_that_is_cancelled_itself_is_a_cancellation() -> None:
    async def cancelled_inside() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await settled(cancelled_inside())


async def test_a_cancellation_thrown_in_by_another_driver_waits_for_the_write() -> None:
    """Not every caller is an asyncio task: a cancellation thrown straight into the
    coroutine is held too, and raised once the write ended."""
    log: list[str] = []
    gate = asyncio.Event()
    driven = settled(_write(log, gate))
    waiting_on = driven.send(None)
    waiting_on._asyncio_future_blocking = False  # taken, as a driver of futures does
    waiting_on = driven.throw(asyncio.CancelledError())
    assert isinstance(waiting_on, asyncio.Future), "the cancellation ended the wait"
    waiting_on._asyncio_future_blocking = False
    await asyncio.sleep(0)
    assert log == ["started"]
    gate.set()
    await waiting_on  # the write's outcome
    assert log == ["started", "landed"]
    with pytest.raises(asyncio.CancelledError):
        driven.send(None)
