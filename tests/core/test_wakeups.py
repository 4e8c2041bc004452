"""Wake-ups: a watcher of a key is woken by a notify of it (from any thread), never
by another key's, and a wake-up between two waits is kept for the next one."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Set

from agentstores import ConversationKey, open_stores
from agentstores.models import RecordedEvent
from agentstores.stores.subscriptions import KeySubscriptions
from agentstores.stores.wakeups import Wakeups

A = ConversationKey("t", "a")
B = ConversationKey("t", "b")


async def test_a_notify_wakes_the_watchers_of_its_key_only() -> None:
    hub = Wakeups()
    with hub.watch(A) as a, hub.watch(A) as a2, hub.watch(B) as b:
        hub.notify(A)
        assert await a.wait(5) and await a2.wait(5)
        assert not await b.wait(0.01), "a notify of A woke a watcher of B"
        assert not await a.wait(0.01), "one wake-up woke two waits"


async def test_a_wake_up_before_the_wait_is_kept() -> None:
    hub = Wakeups()
    with hub.watch(A) as watch:
        hub.notify(A)
        hub.notify(A)  # repeated: still one wake-up
        assert await watch.wait(5)
        assert not await watch.wait(0.01)


async def test_a_notify_from_another_thread_wakes_the_watcher_on_its_loop() -> None:
    hub = Wakeups()
    with hub.watch(A) as watch:
        waiting = asyncio.ensure_future(watch.wait(30))
        await asyncio.sleep(0)
        threading.Thread(target=hub.notify, args=(A,)).start()
        assert await asyncio.wait_for(waiting, 10)


async def test_a_closed_watch_is_forgotten() -> None:
    hub = Wakeups()
    watch = hub.watch(A)
    assert hub.watched() == {A}
    watch.close()
    watch.close()
    assert hub.watched() == frozenset()
    hub.notify(A)  # nobody to wake


async def test_a_bundles_writes_wake_its_watchers() -> None:
    async with open_stores(f"memory://wakeups-{uuid.uuid4().hex}") as stores:
        with stores.wakeups.watch(A) as watch:
            assert not await watch.wait(0.01)
            await stores.recording.put(A, "u", RecordedEvent(1, {"text": "x"}, "m", 0))
            assert await watch.wait(5), "a recorded snapshot woke nobody"
            await stores.conversations.get_conversation(A, "u")
            assert not await watch.wait(0.01), "a read woke a watcher"


class _Recorder(KeySubscriptions):
    """Per-key subscriptions whose server is a set here; ``gate`` holds a subscribe open."""

    def __init__(self, hub: Wakeups) -> None:
        super().__init__(hub)
        self.server: set[ConversationKey] = set()
        self.gate = asyncio.Event()
        self.gate.set()

    async def _subscribe(self, keys: Set[ConversationKey]) -> None:
        await self.gate.wait()
        self.server |= keys

    async def _unsubscribe(self, keys: Set[ConversationKey]) -> None:
        self.server -= keys


async def _until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not check():  # noqa: ASYNC110 - polling a plain predicate is the test's point
            await asyncio.sleep(0.001)


async def test_a_key_is_pushed_only_once_subscribed_and_its_watchers_woken_then() -> None:
    hub = Wakeups()
    hub.remote = True
    subs = _Recorder(hub)
    subs.gate.clear()
    subs.start()
    try:
        with hub.watch(A) as watch:
            await asyncio.sleep(0.01)
            assert not watch.pushed, "pushed before the subscription was confirmed"
            assert not await watch.wait(0.01)
            subs.gate.set()
            assert await watch.wait(10), "the confirmed subscription woke nobody"
            assert watch.pushed and subs.server == {A}
            with hub.watch(A), hub.watch(B) as b:
                await _until(lambda: subs.server == {A, B})
                assert b.pushed
            await _until(lambda: subs.server == {A})
            assert hub.pushing(A) and not hub.pushing(B)
        await _until(lambda: not subs.server)
        assert not subs.active
    finally:
        await subs.close()
    assert hub.subscriber is None


async def test_a_lost_connection_unpushes_every_key_until_resubscribed() -> None:
    hub = Wakeups()
    hub.remote = True
    subs = _Recorder(hub)
    subs.start()
    try:
        with hub.watch(A) as watch:
            await _until(lambda: watch.pushed)
            subs.reset()
            subs.server.clear()
            assert not watch.pushed
            subs.resubscribe()
            await _until(lambda: watch.pushed)
            assert subs.server == {A}
            hub.remote = False
            assert not watch.pushed, "pushed with no listener up"
    finally:
        await subs.close()


async def test_a_key_dropped_while_its_subscribe_is_in_flight_is_unsubscribed() -> None:
    hub = Wakeups()
    hub.remote = True
    subs = _Recorder(hub)
    subs.gate.clear()
    subs.start()
    try:
        watch = hub.watch(A)
        await asyncio.sleep(0.01)
        watch.close()
        subs.gate.set()
        await _until(lambda: subs.syncs >= 1 and not subs.server)
        assert not subs.active
    finally:
        await subs.close()
