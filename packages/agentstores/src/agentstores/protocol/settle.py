"""``settled``: a store write awaited to its outcome even when its caller is cancelled.

A caller cancelled mid-write (a client disconnect, a timeout around a framework's
``add_items``) must not leave a write that lands after the caller was told it ended:
some adapters run a call in a worker thread that a cancellation does not stop, and a
write whose request was sent may land anyway. ``settled`` lets the write finish (or
fail), then re-raises the cancellation, so when the caller hears ``CancelledError`` the
outcome is already decided and visible to the next read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def settled(work: Awaitable[T]) -> T:
    """``await work``, but if the caller is cancelled meanwhile, wait for ``work`` to end
    and then raise the cancellation (the write's own error, if any, is dropped: the
    cancellation is what the caller hears)."""
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so it is not reported as never retrieved
        raise cancelled
    return task.result()


__all__ = ["settled"]
