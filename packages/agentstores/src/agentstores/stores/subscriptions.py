"""Per-key subscriptions: keep a backend listener subscribed to exactly the watched keys.

A listener that hears every write of every key costs every writer something (PostgreSQL
serialises commits that notify; a Redis channel nobody reads is still published to). One
that subscribes only to the keys this process follows makes an unfollowed write free.
:class:`KeySubscriptions` is the bookkeeping such a listener needs, so an adapter writes
only the two storage calls: subscribe these keys, unsubscribe those.

The rules that keep a follower from missing a write:

- a key counts as pushed (:meth:`pushing`) only once its subscription is confirmed; until
  then its followers poll;
- right after a key's subscription is confirmed its watchers are woken, so a write made
  between a follower's first read and the subscription is read at once;
- when the listener's connection is lost the adapter calls :meth:`reset` (every key is
  unpushed and its followers poll) and, once connected again, :meth:`resubscribe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Set

from ..keys import ConversationKey
from .wakeups import Wakeups

log = logging.getLogger(__name__)

RETRY_FIRST = 0.05
RETRY_MAX = 2.0
"""Seconds between attempts after a failed (un)subscribe: doubling from the first to the most."""
CLOSE_TIMEOUT = 2.0
"""Seconds :meth:`KeySubscriptions.close` waits for its task to stop after cancelling it."""


class KeySubscriptions(ABC):
    """One bundle's per-key subscriptions; the hub's :attr:`Wakeups.subscriber` while started.

    Implement :meth:`_subscribe` and :meth:`_unsubscribe` (each confirmed by the server when
    it returns). One task applies the changes, one batch at a time, in order.
    """

    def __init__(self, wakeups: Wakeups) -> None:
        self.wakeups = wakeups
        self._active: set[ConversationKey] = set()
        self._changed = asyncio.Event()
        self._generation = 0
        self._task: asyncio.Task[None] | None = None
        self.syncs = 0
        """How many batches were applied (tests read it)."""

    # --- for the adapter --------------------------------------------------------------

    def start(self) -> None:
        """Become the hub's subscriber and subscribe to what it already watches."""
        self.wakeups.subscriber = self
        self._changed.set()
        self._task = asyncio.create_task(self._keep(), name="agentstores-key-subscriptions")

    async def close(self) -> None:
        """Stop (idempotent): nothing counts as pushed any more."""
        if self.wakeups.subscriber is self:
            self.wakeups.subscriber = None
        task, self._task = self._task, None
        self.reset()
        if task is not None:
            task.cancel()
            # Bounded: a driver that swallows the cancellation must not hang the close.
            done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
            if not done:
                log.warning("push: the subscription task did not stop; left behind")
            elif not task.cancelled():
                with contextlib.suppress(Exception):
                    task.result()

    def reset(self) -> None:
        """The connection holding the subscriptions is lost: no key is pushed now."""
        self._generation += 1
        self._active.clear()

    def resubscribe(self) -> None:
        """Connected again: subscribe every watched key anew."""
        self.reset()
        self._changed.set()

    @property
    def active(self) -> frozenset[ConversationKey]:
        """The keys whose subscription is confirmed."""
        return frozenset(self._active)

    @abstractmethod
    async def _subscribe(self, keys: Set[ConversationKey]) -> None:
        """Subscribe to ``keys``; return once the server confirmed it."""

    @abstractmethod
    async def _unsubscribe(self, keys: Set[ConversationKey]) -> None:
        """Drop the subscriptions of ``keys`` (nobody watches them any more)."""

    # --- Subscriber -----------------------------------------------------------------

    def watching_changed(self) -> None:
        """The hub's watched set changed: apply it soon."""
        self._changed.set()

    def pushing(self, key: ConversationKey) -> bool:
        """Whether ``key``'s subscription is confirmed."""
        return key in self._active

    # --- the task ---------------------------------------------------------------------

    async def _keep(self) -> None:
        delay = RETRY_FIRST
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self._sync()
            except Exception as exc:
                log.info("push: updating subscriptions failed (%s); retrying", exc)
                self._changed.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
            else:
                delay = RETRY_FIRST

    async def _sync(self) -> None:
        """Drop the keys nobody watches, then subscribe the new ones and wake their watchers."""
        wanted = self.wakeups.watched()
        gone = self._active - wanted
        if gone:
            self._active -= gone
            await self._unsubscribe(gone)
        new = wanted - self._active
        if not new:
            return
        generation = self._generation
        await self._subscribe(new)
        self.syncs += 1
        if generation != self._generation:  # lost meanwhile: subscribe again once back
            return
        self._active |= new  # one unwatched meanwhile is dropped by the next batch
        for key in new:
            self.wakeups.notify(key)


__all__ = ["KeySubscriptions"]
