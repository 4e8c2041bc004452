"""Followers of one answer in one process share their reads: one write costs one read of
each store however many follow it, and every follower still gets every update."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from agentstores import ConversationKey, Message, open_stores
from agentstores.protocol import FollowEnd, FollowUpdate, LeaseConfig, follow, start_turn
from agentstores.protocol.shared_reads import shared_reads

FOLLOWERS = 50
FAR = 60.0
LONG = LeaseConfig(dead_after=60.0, heartbeat_interval=5.0)


class _Counted:
    """Counts the calls of one store method (the store itself answers them)."""

    def __init__(self, target: Any, name: str) -> None:
        self.calls = 0
        real = getattr(target, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await real(*args, **kwargs)

        setattr(target, name, counted)


async def test_many_followers_of_one_answer_share_each_read() -> None:
    key = ConversationKey("t", uuid.uuid4().hex)
    async with open_stores(f"memory://shared-{uuid.uuid4().hex}") as stores:
        lease = await start_turn(
            stores, key, "u", "m1", None, user_message=Message.user("q"), lease_config=LONG
        )
        await lease.record(3, {"text": "abc"})
        rows = _Counted(stores.supervision, "read")
        records = _Counted(stores.recording, "read")
        streams = [
            follow(stores, key, "u", message_id="m1", poll=FAR, safety_poll=FAR)
            for _ in range(FOLLOWERS)
        ]
        first = await asyncio.gather(*(anext(s) for s in streams))
        assert all(isinstance(e, FollowUpdate) and e.text == "abc" for e in first)
        before = (rows.calls, records.calls)
        waiting = [asyncio.ensure_future(anext(s)) for s in streams]
        await asyncio.sleep(0.05)  # every follower waits now
        await lease.record(6, {"text": "abcdef"})
        second = await asyncio.wait_for(asyncio.gather(*waiting), 30)
        assert all(isinstance(e, FollowUpdate) and e.delta == "def" for e in second), second
        spent = (rows.calls - before[0], records.calls - before[1])
        assert spent[0] <= 2 and spent[1] <= 2, f"{FOLLOWERS} followers read {spent} for one write"
        assert shared_reads(stores).joined >= FOLLOWERS
        await lease.append([Message.assistant("abcdefg", id="m1")])
        await lease.seal()
        ends = await asyncio.wait_for(asyncio.gather(*(_last(s) for s in streams)), 30)
        assert all(e.verdict == "done" and e.index == 7 for e in ends), ends


async def _last(stream: Any) -> FollowEnd:
    async for event in stream:
        if isinstance(event, FollowEnd):
            return event
    raise AssertionError("the follow ended without a FollowEnd")


async def test_a_follower_woken_by_a_write_never_joins_a_read_begun_before_it() -> None:
    key = ConversationKey("t", uuid.uuid4().hex)
    async with open_stores(f"memory://shared-{uuid.uuid4().hex}") as stores:
        lease = await start_turn(
            stores, key, "u", "m1", None, user_message=Message.user("q"), lease_config=LONG
        )
        await lease.record(3, {"text": "abc"})
        polling = follow(stores, key, "u", message_id="m1", poll=0.05, safety_poll=0.05)
        woken = follow(stores, key, "u", message_id="m1", poll=FAR, safety_poll=FAR)
        assert isinstance(await anext(polling), FollowUpdate)
        assert isinstance(await anext(woken), FollowUpdate)
        real = stores.recording.read
        held, release = asyncio.Event(), asyncio.Event()

        async def read_then_hold(*args: Any, **kwargs: Any) -> Any:
            # The first read after this point sees the store before the write below,
            # then stays in flight until released.
            result = await real(*args, **kwargs)
            if not held.is_set():
                held.set()
                await release.wait()
            return result

        stores.recording.read = read_then_hold  # type: ignore[method-assign]
        polled = asyncio.ensure_future(anext(polling))
        waiting = asyncio.ensure_future(anext(woken))
        await asyncio.wait_for(held.wait(), 30)  # the poller's read is in flight
        await lease.record(6, {"text": "abcdef"})  # wakes the other follower
        try:
            update = await asyncio.wait_for(waiting, 10)
        finally:
            release.set()
        assert isinstance(update, FollowUpdate) and update.delta == "def", update
        late = await asyncio.wait_for(polled, 30)
        assert isinstance(late, FollowUpdate) and late.text == "abcdef", late
        await polling.aclose()
        await woken.aclose()
