"""Wake-ups: a watcher of a key is woken by a notify of it (from any thread), never
by another key's, and a wake-up between two waits is kept for the next one."""

from __future__ import annotations

import asyncio
import threading
import uuid

from agentstores import ConversationKey, open_stores
from agentstores.models import RecordedEvent
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
