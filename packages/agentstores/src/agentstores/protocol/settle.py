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
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_EAGER: dict[str, Any] = {"eager_start": True} if sys.version_info >= (3, 12) else {}
"""Start the write's task at once, in the caller's step (3.12+): one loop pass fewer."""


class _Outcome(asyncio.Future[T]):
    """The write's outcome, as the caller awaits it: a future that declines ``cancel()``.

    A task cancelled while it waits asks the future it waits on to cancel; when that
    future declines, the task keeps waiting and receives its ``CancelledError`` as soon
    as the future is done. So the caller's cancellation is held until the write ended,
    while the write's own task stays cancellable by its own code (its timeouts)."""

    def cancel(self, msg: Any | None = None) -> bool:
        return False


async def _run(work: Coroutine[Any, Any, T], outcome: _Outcome[T]) -> None:
    """Await ``work`` and hand its result or error to ``outcome`` in the same step (no
    done-callback pass between the write ending and the caller waking)."""
    try:
        result = await work
    except asyncio.CancelledError:
        asyncio.Future.cancel(outcome)  # the write itself was cancelled
        raise
    except BaseException as exc:  # every outcome goes to the caller
        outcome.set_exception(exc)
    else:
        outcome.set_result(result)


async def settled(work: Coroutine[Any, Any, T]) -> T:
    """``await work``, but if the caller is cancelled meanwhile, wait for ``work`` to end
    and then raise the cancellation (the write's own error, if any, is dropped: the
    cancellation is what the caller hears)."""
    loop = asyncio.get_running_loop()
    outcome: _Outcome[T] = _Outcome(loop=loop)
    _writer = asyncio.Task(_run(work, outcome), loop=loop, **_EAGER)  # held while awaited
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await outcome
        except asyncio.CancelledError as exc:
            if not outcome.done():  # thrown in by a driver other than a task: keep waiting
                cancelled = cancelled or exc
                continue
            if not outcome.cancelled():
                outcome.exception()  # retrieved: the caller hears its cancellation instead
            raise cancelled or exc from None
        except BaseException:
            if cancelled is None:
                raise
            raise cancelled from None
        if cancelled is not None:
            raise cancelled
        return result


__all__ = ["settled"]
