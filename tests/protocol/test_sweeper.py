"""The sweeper on the in-memory reference backend, with a clock the test controls."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from agentstores.errors import ErasedError, NotFoundError
from agentstores.keys import ConversationKey
from agentstores.memory.stores import MemoryConversationStore, MemoryStores
from agentstores.models import Message
from agentstores.protocol import Sweeper, claim, rehydrate
from agentstores.stores import SweepRule

from .conftest import ManualClock

USER = "alice"


async def _conversation(stores: MemoryStores, key: ConversationKey, owner: str = USER, **kw):
    await stores.conversations.append_messages(key, owner, [Message("u1", "user", "hi")], **kw)


async def test_expired_conversation_is_erased_in_every_store(
    stores: MemoryStores, clock: ManualClock
):
    doomed = ConversationKey("t", "temporary")
    kept = ConversationKey("t", "permanent")
    await _conversation(stores, doomed, expires_at=clock.now + timedelta(minutes=5))
    await _conversation(stores, kept)
    lease = await claim(stores, doomed, USER, "a1")
    await lease.record(1, "x")
    await lease.save_state({"pos": 1})
    await stores.pause_tokens.put("tok", doomed, USER, {"p": 1}, clock.now + timedelta(days=1))

    sweeper = Sweeper(stores)
    assert (await sweeper.sweep_once()).erased == 0
    clock.advance(301)
    report = await sweeper.sweep_once()
    assert (report.expired, report.idle, report.over_cap) == (1, 0, 0)

    assert await stores.conversations.get_conversation(doomed, USER) is None
    assert await stores.conversations.read_messages(doomed, USER) == []
    assert await stores.recording.read(doomed, USER) is None
    assert await stores.state.load(doomed, USER) == {}
    assert (await stores.supervision.read(doomed, USER)).row is None
    with pytest.raises(NotFoundError):
        await stores.pause_tokens.claim("tok", doomed, USER)
    # The tombstone refuses the late producer and a late append.
    with pytest.raises(ErasedError):
        await lease.save_state({"pos": 2})
    with pytest.raises(ErasedError):
        await _conversation(stores, doomed)
    assert await stores.conversations.get_conversation(kept, USER) is not None


async def test_idle_conversations_go_and_a_touched_one_survives_the_sweep(
    stores: MemoryStores, clock: ManualClock
):
    keys = [ConversationKey("t", f"s{i}") for i in range(4)]
    for k in keys:
        await _conversation(stores, k)
    clock.advance(3 * 86400)
    touched = keys[0]

    class TouchMidSweep(MemoryConversationStore):
        """Appends to ``touched`` after the candidates were found, before they are erased."""

        async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
            found = await super()._find_sweepable(rule, limit)
            if touched in found:
                await stores.conversations.append_messages(
                    touched, USER, [Message("u2", "user", "still here")]
                )
            return found

    stores.conversations = TouchMidSweep(stores.data)
    report = await Sweeper(stores, expire=False, idle_for=timedelta(days=2)).sweep_once()
    assert (report.idle, report.survived) == (3, 1)
    assert await stores.conversations.get_conversation(touched, USER) is not None
    for k in keys[1:]:
        assert await stores.conversations.get_conversation(k, USER) is None


async def test_over_cap_keeps_each_owners_newest(stores: MemoryStores, clock: ManualClock):
    alice = [ConversationKey("t", f"a{i}") for i in range(5)]
    bob = [ConversationKey("t", f"b{i}") for i in range(2)]
    for k in alice:
        clock.advance(1)
        await _conversation(stores, k, owner="alice")
    for k in bob:
        clock.advance(1)
        await _conversation(stores, k, owner="bob")
    report = await Sweeper(stores, expire=False, keep_per_principal=2).sweep_once()
    assert report.over_cap == 3
    left = await stores.conversations.list_conversations("t", "alice")
    assert [i.key for i in left.items] == [alice[4], alice[3]]
    assert len((await stores.conversations.list_conversations("t", "bob")).items) == 2


async def test_sweeps_in_batches(stores: MemoryStores, clock: ManualClock):
    for i in range(7):
        await _conversation(
            stores, ConversationKey("t", f"s{i}"), expires_at=clock.now + timedelta(seconds=1)
        )
    clock.advance(2)
    report = await Sweeper(stores, batch_size=3).sweep_once()
    assert (report.expired, report.batches) == (7, 3)
    assert await stores.conversations.find_sweepable(Sweeper(stores).rules[0][1]) == []


async def test_run_forever_sweeps_until_stopped(stores: MemoryStores, clock: ManualClock):
    await _conversation(
        stores, ConversationKey("t", "x"), expires_at=clock.now + timedelta(seconds=1)
    )
    clock.advance(2)
    sweeper = Sweeper(stores)
    stop = asyncio.Event()
    task = asyncio.create_task(sweeper.run_forever(0.01, jitter=0.5, stop=stop))
    for _ in range(1000):
        if sweeper.last_report is not None:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, timeout=10)
    assert sweeper.last_report is not None
    assert await stores.conversations.get_conversation(ConversationKey("t", "x"), USER) is None


async def test_rehydrate_replays_the_last_user_and_assistant_turns(
    stores: MemoryStores, key: ConversationKey
):
    msgs = [
        Message("1", "user", "q1"),
        Message("2", "assistant", "a1"),
        Message("3", "tool", {"call": 1}),
        Message("4", "user", "q2"),
        Message("5", "system", "note"),
        Message("6", "assistant", "a2"),
    ]
    await stores.conversations.append_messages(key, USER, msgs)
    got = await rehydrate(stores, key, USER, 3)
    assert [(m.id, m.role, m.content) for m in got] == [
        ("2", "assistant", "a1"),
        ("4", "user", "q2"),
        ("6", "assistant", "a2"),
    ]
    assert await rehydrate(stores, key, "mallory", 3) == []
    assert await rehydrate(stores, ConversationKey("t", "absent"), USER, 3) == []
