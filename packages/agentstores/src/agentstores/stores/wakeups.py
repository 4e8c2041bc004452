"""Wake-ups: "something changed under this key", fanned out to this process's watchers.

A follower waits between two reads of the store; a wake-up ends that wait early so it
reads again at once. A wake-up carries no data and promises nothing: the store stays the
only truth, so a wake-up lost, repeated, late or out of order may delay what a watcher
sees (to its next safety poll) but never changes it.

Every bundle has one :class:`Wakeups` (``stores.wakeups``). The core's store methods wake
its watchers after each write a follower cares about (a recorded snapshot, a supervision
row written or removed, messages appended, a transcript cut, an erasure), so a follower
in the producer's process wakes without any help from the backend. A backend that can
push changes from other processes (PostgreSQL ``LISTEN``, Redis pub/sub) runs a listener
that calls :meth:`Wakeups.notify` for each change it hears and sets :attr:`Wakeups.remote`
while it listens: followers then poll only slowly, as a safety net. A listener that
subscribes per key (so that writes nobody follows cost nothing) is the hub's
:attr:`Wakeups.subscriber` (see :mod:`.subscriptions`): a key counts as pushed only once
its subscription is in place, and the subscriber wakes the key's watchers then, so a write
made before that is read at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from types import TracebackType
from typing import Protocol

from ..keys import ConversationKey


class Subscriber(Protocol):
    """A backend listener that subscribes to exactly the watched keys."""

    def watching_changed(self) -> None:
        """The set of watched keys changed (:meth:`Wakeups.watched`): subscribe to new
        keys, drop the others. Called on the watchers' loop; must not block."""

    def pushing(self, key: ConversationKey) -> bool:
        """Whether other processes' writes of ``key`` wake its watchers now."""


class Watch:
    """One watcher of one key (:meth:`Wakeups.watch`); use as ``with``."""

    __slots__ = ("_event", "_hub", "_loop", "key")

    def __init__(self, hub: Wakeups, key: ConversationKey) -> None:
        self._hub = hub
        self.key = key
        self._event = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def wake(self) -> None:
        """End the current (or the next) :meth:`wait` early (from any thread)."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._event.set()
            return
        with contextlib.suppress(RuntimeError):  # the watcher's loop has closed
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self, at_most: float) -> bool:
        """Until a wake-up arrives or ``at_most`` seconds pass; True when woken. A
        wake-up that arrived since the last wait ends this one at once (none is missed
        between a read and the wait that follows it)."""
        if not self._event.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(at_most):
                    await self._event.wait()
        woken = self._event.is_set()
        self._event.clear()
        return woken

    @property
    def pushed(self) -> bool:
        """Whether other processes' writes of this key wake this watcher now (else it
        must poll): :meth:`Wakeups.pushing`."""
        return self._hub.pushing(self.key)

    def close(self) -> None:
        """Stop watching (idempotent)."""
        self._hub._drop(self)

    def __enter__(self) -> Watch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Wakeups:
    """The watchers of one bundle, by key, and the entry point of every wake-up (callable
    from any thread: a watcher is woken on its own loop)."""

    def __init__(self) -> None:
        self._watchers: dict[ConversationKey, set[Watch]] = {}
        self._clock = itertools.count(1)  # next() is atomic: notify may run on any thread
        self._generations: dict[ConversationKey, int] = {}
        self.remote = False
        """True while wake-ups for other processes' writes arrive (a backend listener is
        up): a watcher may then wait long between reads. False: only this process's own
        writes wake watchers, and they must poll."""
        self.subscriber: Subscriber | None = None
        """The listener that subscribes per key, if the backend's does (None: a listener,
        if any, hears every key)."""

    def watch(self, key: ConversationKey) -> Watch:
        """A watcher of ``key``, woken by every :meth:`notify` of it until closed (call
        it in the task that waits: the watch belongs to the running loop)."""
        watch = Watch(self, key)
        watchers = self._watchers.setdefault(key, set())
        watchers.add(watch)
        self._generations.setdefault(key, next(self._clock))
        if len(watchers) == 1 and self.subscriber is not None:
            self.subscriber.watching_changed()
        return watch

    def notify(self, key: ConversationKey) -> None:
        """Wake every watcher of ``key`` in this process (none: nothing happens)."""
        if not self._watchers:
            return
        watchers = tuple(self._watchers.get(key, ()))
        if watchers:
            self._generations[key] = next(self._clock)
        for watch in watchers:
            watch.wake()

    def generation(self, key: ConversationKey) -> int:
        """A number that grows with every wake-up of ``key`` while it is watched (and is
        never reused for it): a read that began at a generation at least this one began
        after every wake-up its watchers have had so far. 0 for a key nobody watches."""
        return self._generations.get(key, 0)

    def pushing(self, key: ConversationKey) -> bool:
        """Whether other processes' writes of ``key`` wake its watchers now: a listener
        is up and, where it subscribes per key, subscribed to this one."""
        subscriber = self.subscriber
        return self.remote and (subscriber is None or subscriber.pushing(key))

    def watched(self) -> frozenset[ConversationKey]:
        """The keys someone watches now (a listener may subscribe to just these)."""
        return frozenset(self._watchers)

    def _drop(self, watch: Watch) -> None:
        watchers = self._watchers.get(watch.key)
        if watchers is None:
            return
        watchers.discard(watch)
        if not watchers:
            del self._watchers[watch.key]
            self._generations.pop(watch.key, None)
            if self.subscriber is not None:
                self.subscriber.watching_changed()


__all__ = ["Subscriber", "Wakeups", "Watch"]
