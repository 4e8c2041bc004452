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
