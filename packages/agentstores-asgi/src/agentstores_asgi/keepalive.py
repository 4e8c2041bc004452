"""SSE comments while a stream has nothing to send, so idle proxies keep it open."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from . import uistream

_END = object()


async def keep_alive(events: AsyncIterator[bytes], every: float) -> AsyncIterator[bytes]:
    """``events`` as they come, with an SSE comment after each ``every`` seconds of silence.

    The events are read in their own task; closing this iterator (the client went away)
    cancels it, and an error it raised is raised here after what it sent.
    """
    queue: asyncio.Queue[object] = asyncio.Queue()  # an answer's events: bounded by it

    async def pump() -> None:
        try:
            async for event in events:
                queue.put_nowait(event)
        finally:
            queue.put_nowait(_END)

    task = asyncio.create_task(pump())
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), every)
            except TimeoutError:
                yield uistream.comment()
                continue
            if item is _END:
                break
            assert isinstance(item, bytes)
            yield item
        await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
