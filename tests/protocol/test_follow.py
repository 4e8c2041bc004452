"""The follower's edge cases on the in-memory backend, with a store clock the test moves.

The contract suite's ``protocol.follow.*`` promises cover the main paths on every
backend; these pin the rules around them: what ends a follow at once, what is skipped
and counted, and which arguments are refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any

import pytest

import agentstores
from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.memory.stores import MemoryStores
from agentstores.models import Message, RecordedEvent, SupervisionRow, SupervisionView
from agentstores.protocol import (
    FollowEnd,
    FollowEvent,
    FollowUpdate,
    Lease,
    LeaseConfig,
    claim,
    follow,
    start_turn,
)

from .conftest import ManualClock

USER = "alice"
CONFIG = LeaseConfig(dead_after=3.0, heartbeat_interval=1.0)
POLL = 0.005
WAIT = 10.0
"""Deadline of one step (seconds); reaching it fails the test, a slow run never does."""


def text(n: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[:n]


async def step(it: AsyncGenerator[FollowEvent, None]) -> FollowEvent:
    return await asyncio.wait_for(anext(it), WAIT)


async def drain(it: AsyncGenerator[FollowEvent, None]) -> list[FollowEvent]:
    async def all_of() -> list[FollowEvent]:
        return [event async for event in it]

    return await asyncio.wait_for(all_of(), WAIT)


def following(
    stores: MemoryStores, key: ConversationKey, **kw: Any
) -> AsyncGenerator[FollowEvent, None]:
    kw.setdefault("poll", POLL)
    return follow(stores, key, USER, **kw)


async def turn(stores: MemoryStores, key: ConversationKey, mid: str = "a1") -> Lease:
    return await start_turn(
        stores, key, USER, mid, None, user_message=Message("u1", "user", "q"), lease_config=CONFIG
    )


async def finish(lease: Lease, answer: str) -> None:
    await lease.append([Message(lease.message_id, "assistant", answer)])
    await lease.seal("done")


async def test_exported_from_the_package() -> None:
    assert agentstores.follow is follow
    assert agentstores.FollowUpdate is FollowUpdate and agentstores.FollowEnd is FollowEnd


async def test_no_row_at_start_is_gone_at_once(stores: MemoryStores, key: ConversationKey):
    assert await drain(following(stores, key)) == [FollowEnd("gone")]
    end = (await drain(following(stores, key, message_id="a1", start_index=4)))[-1]
    assert end == FollowEnd("gone", message_id="a1", index=4)


async def test_sealed_at_start_ends_with_the_final_text(stores: MemoryStores, key: ConversationKey):
    lease = await turn(stores, key)
    await finish(lease, "hello")
    events = await drain(following(stores, key))
    assert [type(e) for e in events] == [FollowUpdate, FollowEnd]
    update, end = events
    assert isinstance(update, FollowUpdate) and isinstance(end, FollowEnd)
    assert (update.index, update.text, update.delta, update.epoch) == (5, "hello", "hello", 1)
    assert end.verdict == "done" and end.message is not None and end.message.id == "a1"
    assert end.index == 5
    # A client that already has it all gets the verdict alone.
    assert [type(e) for e in await drain(following(stores, key, start_index=5))] == [FollowEnd]


async def test_released_between_polls_is_done_from_the_transcript(
    stores: MemoryStores, key: ConversationKey
):
    lease = await turn(stores, key)
    await lease.record(3, {"text": "abc"})
    it = following(stores, key)
    first = await step(it)
    assert isinstance(first, FollowUpdate) and first.index == 3
    await finish(lease, "abcdef")
    await lease.drop_recording()
    assert await lease.release()
    rest = await drain(it)
    assert [(type(e), getattr(e, "delta", None)) for e in rest] == [
        (FollowUpdate, "def"),
        (FollowEnd, None),
    ]
    end = rest[-1]
    assert isinstance(end, FollowEnd) and end.verdict == "done" and end.message is not None


async def test_the_next_turn_without_the_message_is_gone(
    stores: MemoryStores, key: ConversationKey
):
    lease = await turn(stores, key)
    await lease.record(2, {"text": "ab"})
    it = following(stores, key)
    assert isinstance(await step(it), FollowUpdate)
    await lease.seal("errored")
    await lease.release()
    await claim(stores, key, USER, "a2", lease_config=CONFIG)
    assert await drain(it) == [FollowEnd("gone", message_id="a1", index=2)]


async def test_a_named_turn_already_answered_is_done(stores: MemoryStores, key: ConversationKey):
    first = await turn(stores, key)
    await finish(first, "xyz")
    await claim(stores, key, USER, "a2", lease_config=CONFIG)
    events = await drain(following(stores, key, message_id="a1"))
    end = events[-1]
    assert isinstance(end, FollowEnd) and end.verdict == "done"
    assert end.message is not None and end.message.content == "xyz"


async def test_malformed_and_divergent_snapshots_are_skipped_and_counted(
    stores: MemoryStores, key: ConversationKey
):
    lease = await turn(stores, key)
    await lease.record(3, {"text": "abc"})
    it = following(stores, key)
    assert isinstance(await step(it), FollowUpdate)
    for index, message in ((5, {"text": "abc"}), (6, {"no": "text"}), (7, {"text": "abXdefg"})):
        await lease.record(index, message)
        await asyncio.sleep(20 * POLL)
    await lease.record(8, {"text": "abcdefgh"})
    update = await step(it)
    assert isinstance(update, FollowUpdate) and (update.index, update.delta) == (8, "defgh")
    # A final answer that does not extend the stream is not streamed; the end carries it.
    await finish(lease, "something else")
    end = await step(it)
    assert isinstance(end, FollowEnd) and end.verdict == "done"
    assert end.message is not None and end.message.content == "something else"
    assert end.index == 8 and end.skipped >= 1


async def test_a_snapshot_older_than_the_lease_waits_for_the_new_producer(
    stores: MemoryStores, key: ConversationKey, clock: ManualClock
):
    lease = await turn(stores, key)
    await lease.record(4, {"text": text(4)})
    clock.advance(CONFIG.dead_after + 1)
    heir = await claim(stores, key, USER, "a1", lease_config=CONFIG)
    assert heir.epoch > lease.epoch
    it = following(stores, key)
    waiting = asyncio.ensure_future(anext(it))
    await asyncio.sleep(20 * POLL)
    assert not waiting.done(), "the dead producer's snapshot was streamed under the heir"
    await heir.record(6, {"text": text(6)})
    update = await asyncio.wait_for(waiting, WAIT)
    assert isinstance(update, FollowUpdate)
    assert (update.index, update.delta, update.epoch) == (6, text(6), heir.epoch)
    await it.aclose()


async def test_dead_waits_out_the_grace_on_the_store_clock(
    stores: MemoryStores, key: ConversationKey, clock: ManualClock
):
    lease = await turn(stores, key)
    await lease.record(2, {"text": "ab"})
    it = following(stores, key, dead_after=1.0, grace=5.0)
    assert isinstance(await step(it), FollowUpdate)
    clock.advance(4.0)  # dead, within the grace: the follow waits
    nxt = asyncio.ensure_future(anext(it))
    await asyncio.sleep(20 * POLL)
    assert not nxt.done()
    clock.advance(2.5)  # 6.5 s silent > dead_after + grace
    end = await asyncio.wait_for(nxt, WAIT)
    assert end == FollowEnd("dead", message_id="a1", index=2)


async def test_a_row_with_no_heartbeat_stamp_counts_as_dead(
    stores: MemoryStores, key: ConversationKey, monkeypatch: pytest.MonkeyPatch
):
    assert await stores.supervision.compare_and_swap(
        key, USER, None, SupervisionRow("running", "a1", 1)
    )
    await stores.recording.put(key, USER, RecordedEvent(1, {"text": "a"}, "a1", 1))
    real_read = stores.supervision.read

    async def unstamped(k: ConversationKey, p: str) -> SupervisionView:
        view = await real_read(k, p)
        assert view.row is not None
        return SupervisionView(replace(view.row, heartbeat_at=None), view.now, view.fence)

    monkeypatch.setattr(stores.supervision, "read", unstamped)
    assert await drain(following(stores, key)) == [FollowEnd("dead", message_id="a1")]
    events = await drain(following(stores, key, partial=True))
    assert [type(e) for e in events] == [FollowUpdate, FollowEnd]


async def test_an_invisible_principal_sees_gone(stores: MemoryStores, key: ConversationKey):
    lease = await turn(stores, key)
    await lease.record(2, {"text": "ab"})
    events = await drain(follow(stores, key, "mallory", poll=POLL))
    assert events == [FollowEnd("gone")]


async def test_shared_principal_follows(stores: MemoryStores, key: ConversationKey):
    lease = await turn(stores, key)
    await lease.record(2, {"text": "ab"})
    await stores.conversations.share(key, USER, "bob")
    it = follow(stores, key, "bob", poll=POLL)
    update = await step(it)
    assert isinstance(update, FollowUpdate) and update.text == "ab"
    await it.aclose()


@pytest.mark.parametrize(
    "kw",
    [
        {"start_index": -1},
        {"start_index": True},
        {"poll": 0},
        {"poll": True},
        {"poll": float("nan")},
        {"dead_after": -1.0},
        {"grace": -0.5},
        {"grace": float("inf")},
        {"message_id": ""},
    ],
)
async def test_bad_arguments_are_refused(stores: MemoryStores, key: ConversationKey, kw: Any):
    with pytest.raises(UsageError):
        await anext(follow(stores, key, USER, **kw))


async def test_a_snapshot_behind_the_client_is_counted_not_streamed(
    stores: MemoryStores, key: ConversationKey, monkeypatch: pytest.MonkeyPatch
):
    lease = await turn(stores, key)
    await lease.record(6, {"text": text(6)})
    real_read = stores.recording.read
    read = asyncio.Event()

    async def reading(k: ConversationKey, p: str) -> RecordedEvent | None:
        try:
            return await real_read(k, p)
        finally:
            read.set()

    monkeypatch.setattr(stores.recording, "read", reading)
    it = following(stores, key, start_index=10)
    ending = asyncio.ensure_future(drain(it))
    await asyncio.wait_for(read.wait(), WAIT)
    await lease.seal("errored")
    assert await asyncio.wait_for(ending, WAIT) == [
        FollowEnd("errored", message_id="a1", index=10, behind=1)
    ]


async def test_follows_a_handle_api_turn_to_its_answer(stores: MemoryStores, key: ConversationKey):
    conv = stores.conversation(key, USER)
    updates: asyncio.Queue[FollowEvent] = asyncio.Queue()

    async def client() -> None:
        row = None
        while row is None:  # a second screen opened just before the turn starts
            row = (await stores.supervision.read(key, USER)).row
            await asyncio.sleep(POLL)
        async for event in following(stores, key, message_id="answer-1"):
            await updates.put(event)

    watching = asyncio.ensure_future(client())
    async with conv.turn("answer-1", user=Message.user("hi"), stream_every=0) as turn:
        await turn.stream("Hel")
        first = await asyncio.wait_for(updates.get(), WAIT)
        assert isinstance(first, FollowUpdate) and (first.text, first.delta) == ("Hel", "Hel")
        await turn.stream("Hello")
        second = await asyncio.wait_for(updates.get(), WAIT)
        assert isinstance(second, FollowUpdate) and second.delta == "lo"
        await turn.reply([{"type": "text", "text": "Hello!"}])
    await asyncio.wait_for(watching, WAIT)
    last, end = updates.get_nowait(), updates.get_nowait()
    assert isinstance(last, FollowUpdate) and (last.text, last.delta) == ("Hello!", "!")
    assert isinstance(end, FollowEnd) and end.verdict == "done" and end.message is not None
    assert end.message.id == "answer-1" and end.index == 6


async def test_a_handle_api_turn_that_raises_ends_errored(
    stores: MemoryStores, key: ConversationKey
):
    conv = stores.conversation(key, USER)
    with pytest.raises(RuntimeError):
        async with conv.turn("answer-1", user=Message.user("hi"), stream_every=0) as turn:
            await turn.stream("Hal")
            raise RuntimeError("the model failed")
    events = await drain(following(stores, key, message_id="answer-1"))
    assert events == [FollowEnd("errored", message_id="answer-1")]
