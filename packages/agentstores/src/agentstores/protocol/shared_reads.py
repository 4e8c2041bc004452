"""Shared reads: the followers of one answer in one process read the store once per change.

A thousand tabs following one answer through one replica are woken by the same write; if
each read the supervision row and the recording itself, one write would cost two thousand
reads. :class:`SharedReads` lets a follower join a read of the same thing (same key, same
principal) that is already in flight, but only one that began after every wake-up of the
key so far (:meth:`~agentstores.stores.wakeups.Wakeups.generation`): such a read began
after each write those wake-ups announced, so it shows the joiner everything a read of
its own would have. A read that began earlier is never joined.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..keys import ConversationKey
from ..stores import Stores
from ..stores.wakeups import Wakeups

T = TypeVar("T")

_Slot = tuple[str, ConversationKey, str]


class SharedReads:
    """One bundle's reads in flight, by what they read (a key, a principal, which store)."""

    def __init__(self, wakeups: Wakeups) -> None:
        self._wakeups = wakeups
        self._inflight: dict[_Slot, tuple[int, asyncio.Future[Any]]] = {}
        self.joined = 0
        """How many reads were served by another follower's read (tests read it)."""

    async def read(
        self, what: str, key: ConversationKey, principal: str, call: Callable[[], Awaitable[T]]
    ) -> T:
        """``call()``'s result, or that of the same read already in flight if it began
        after the key's latest wake-up. A cancelled caller leaves the read to the others."""
        slot = (what, key, principal)
        since = self._wakeups.generation(key)
        found = self._inflight.get(slot)
        if found is not None and found[0] >= since and not found[1].done():
            self.joined += 1
            result: T = await asyncio.shield(found[1])
            return result
        task = asyncio.ensure_future(call())
        entry = (since, task)
        self._inflight[slot] = entry

        def forget(done: asyncio.Future[Any]) -> None:
            if self._inflight.get(slot) is entry:
                del self._inflight[slot]
            if not done.cancelled():
                done.exception()  # retrieved: every caller may have gone meanwhile

        task.add_done_callback(forget)
        return await asyncio.shield(task)


_by_hub: weakref.WeakKeyDictionary[Wakeups, SharedReads] = weakref.WeakKeyDictionary()


def shared_reads(stores: Stores) -> SharedReads:
    """The shared reads of the bundle's wake-up hub (made on first use): bundles that share
    a hub share their data too (the in-memory backend's)."""
    hub = stores.wakeups
    found = _by_hub.get(hub)
    if found is None:
        found = _by_hub[hub] = SharedReads(hub)
    return found


__all__ = ["SharedReads", "shared_reads"]
