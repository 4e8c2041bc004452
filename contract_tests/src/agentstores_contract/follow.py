"""The follower on a real backend: ``agentstores.protocol.follow`` streams a running turn
to a reconnecting client from the stores alone. The rules live in the protocol layer;
these tests prove a backend gives the follower what it relies on (the supervision row on
the store clock, the recording's latest snapshot, the final transcript message, erasure)
when the producer writes through another bundle.

Producers drive ``start_turn`` / ``claim`` / ``Lease`` directly and record
``{"text": text}`` at ``index == len(text)``. Nothing asserts how long anything took:
each step waits with a generous deadline, so a slow machine makes a test slower, not red
(the wake-up promise waits for a write's wake-up with polls ten times farther apart than
that deadline: only the wake-up can end the wait).

Wake-up faults are made by replacing the bundle's ``wakeups.notify`` (every wake-up, the
core's after a write and a backend listener's for another process's write, goes through
it) with one that drops, repeats or delays each one.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionView
from agentstores.protocol import (
    FollowEnd,
    FollowEvent,
    FollowUpdate,
    Lease,
    LeaseConfig,
    claim,
    follow,
    heartbeat_age,
    liveness,
    start_turn,
)
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .protocol import LONG, PATIENCE, SHORT, USER, _take_over_when_dead, _until
from .runtime import clients

MID = "a1"
POLL = 0.02
FAR = 10 * PATIENCE
"""Polls this far apart never come within a test: only a wake-up makes the follower read."""
FAULTS = ("dropped", "repeated", "late")
ENDLESS = 10_000
"""More events than any test's follow yields: one that goes on is broken, not slow."""
STEADY = LONG.dead_after
"""``dead_after`` of followers that must never judge a producer dead on a slow machine."""

Follow = AsyncGenerator[FollowEvent, None]


def _text(n: int) -> str:
    """The answer's first ``n`` characters (any prefix of one fixed string)."""
    return ("the quick brown fox jumps over the lazy dog " * 4)[:n]


async def _record(lease: Lease, n: int) -> None:
    await lease.record(n, {"text": _text(n)})


async def _next(events: Follow) -> FollowEvent:
    """The follow's next event, within the patience."""
    try:
        return await asyncio.wait_for(anext(events), PATIENCE)
    except TimeoutError:
        raise AssertionError(f"the follow yielded nothing within {PATIENCE}s") from None


async def _rest(events: Follow) -> list[FollowEvent]:
    """Every remaining event, checking the follow stops after its FollowEnd."""
    out: list[FollowEvent] = []
    while True:
        assert len(out) < ENDLESS, f"the follow yielded {len(out)} events and did not end"
        try:
            out.append(await _next(events))
        except StopAsyncIteration:
            break
    assert out and isinstance(out[-1], FollowEnd), f"the follow did not end with FollowEnd: {out}"
    assert not any(isinstance(e, FollowEnd) for e in out[:-1]), f"two ends: {out}"
    return out


def _update(event: FollowEvent, index: int, delta_from: int) -> FollowUpdate:
    """``event`` as the update to ``index`` whose new part starts at ``delta_from``."""
    assert isinstance(event, FollowUpdate), f"expected an update to {index}, got {event}"
    got = (event.index, event.text, event.delta, event.message_id)
    want = (index, _text(index), _text(index)[delta_from:], MID)
    assert got == want, f"update {got}, expected {want}"
    return event


async def _turn(stores: Stores, key: ConversationKey, lease_config: LeaseConfig = LONG) -> Lease:
    return await start_turn(
        stores,
        key,
        USER,
        MID,
        None,
        user_message=Message("u1", "user", "q"),
        lease_config=lease_config,
    )


async def _finish(lease: Lease, n: int) -> None:
    """Publish the answer's first ``n`` characters and seal the turn done."""
    await lease.append(
        [Message(MID, "assistant", _text(n))],
        expected_tail="u1",
        last_turn_status="complete",
    )
    await lease.seal("done")


def _follow(stores: Stores, key: ConversationKey, **kw: Any) -> Follow:
    kw.setdefault("poll", POLL)
    kw.setdefault("safety_poll", POLL)
    kw.setdefault("dead_after", STEADY)
    return follow(stores, key, kw.pop("principal", USER), **kw)


class _Reads:
    """The follower's reads, noted, so a test knows what the follower polled (and how
    often) before it writes the next thing."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores
        self.rows = 0
        """Supervision reads so far."""
        self.seen: list[tuple[str, int, int] | None] = []
        """What each recording read returned: (message id, index, epoch), or None."""
        self.bundle = cast(
            Stores,
            SimpleNamespace(
                supervision=SimpleNamespace(read=self._row),
                recording=SimpleNamespace(read=self._snapshot),
                conversations=stores.conversations,
                wakeups=stores.wakeups,
            ),
        )

    async def _row(self, key: ConversationKey, principal: str) -> SupervisionView:
        self.rows += 1
        return await self._stores.supervision.read(key, principal)

    async def _snapshot(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        event = await self._stores.recording.read(key, principal)
        self.seen.append(None if event is None else (event.message_id, event.index, event.epoch))
        return event

    async def polled(self, snapshot: tuple[str, int, int] | None, times: int = 3) -> None:
        """Wait until the follower has read ``snapshot`` ``times`` times."""

        async def enough() -> bool | None:
            return True if self.seen.count(snapshot) >= times else None

        await _until(enough, f"the follower to poll {snapshot} {times} times")

    async def waited(self, waiting: asyncio.Future[FollowEvent], times: int = 3) -> None:
        """Wait until the follower has read the row ``times`` more times, yielding nothing."""
        target = self.rows + times

        async def enough() -> bool | None:
            assert not waiting.done(), f"the follow did not wait: {waiting.result()}"
            return True if self.rows >= target else None

        await _until(enough, f"the follower to read the row {times} times")


async def _refused(what: str, **kw: Any) -> None:
    """``follow(..., **kw)`` raises a UsageError whose message starts with ``what``."""
    with pytest.raises(UsageError, match=f"^{what} must"):
        await anext(follow(cast(Stores, None), ConversationKey("t", "s"), USER, **kw))


class FollowContract(ContractBase):
    def _two(
        self, backend: BackendUnderTest, body: Callable[[Stores, Stores], Awaitable[None]]
    ) -> None:
        """Run ``body(producer_stores, follower_stores)``: separate connections where the
        backend is multi-process, as a follower on another replica would have."""

        async def run(stores: Stores) -> None:
            async with clients(backend, stores, 2) as (producer, follower):
                await body(producer, follower)

        self.run(backend, run)

    @promise("protocol.follow.catch_up")
    def test_follow_from_mid_turn_catches_up(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            lease = await _turn(producer, key)
            await _record(lease, 9)
            events = _follow(reader, key)
            _update(await _next(events), 9, 0)
            await _record(lease, 20)
            _update(await _next(events), 20, 9)
            await _finish(lease, 31)
            rest = await _rest(events)
            assert _update(rest[0], 31, 20).epoch == lease.epoch, rest
            end = rest[-1]
            assert isinstance(end, FollowEnd) and len(rest) == 2, rest
            assert (end.verdict, end.message_id, end.index) == ("done", MID, 31), end
            assert end.message is not None and end.message.id == MID
            assert end.message.content == _text(31)

        self._two(backend, body)

    @promise("protocol.follow.start_index")
    def test_follow_with_start_index_jumps_to_the_present(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            lease = await _turn(producer, key)
            await _record(lease, 12)
            events = _follow(reader, key, start_index=5)
            _update(await _next(events), 12, 5)
            await events.aclose()

            # A client already past the recording waits for what lies beyond it.
            events = _follow(reader, key, start_index=16, message_id=MID)
            waiting = asyncio.ensure_future(_next(events))
            await _record(lease, 14)
            await _record(lease, 25)
            _update(await waiting, 25, 16)
            await _finish(lease, 25)
            rest = await _rest(events)
            assert len(rest) == 1 and isinstance(rest[0], FollowEnd), rest
            assert (rest[0].verdict, rest[0].index) == ("done", 25)

        self._two(backend, body)

    @promise("protocol.follow.takeover")
    def test_follow_continues_a_takeover_without_rollback(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            first = await _turn(producer, key, SHORT)
            await first.save_state({"position": 6})
            await _record(first, 6)
            await _record(first, 15)
            events = _follow(reader, key)
            _update(await _next(events), 15, 0)
            # The first producer never beats again: it is dead after SHORT.dead_after.
            heir = await _take_over_when_dead(producer, key, MID)
            assert heir.epoch > first.epoch
            waiting = asyncio.ensure_future(_next(events))
            # The heir resumes from the checkpoint, behind what the client has seen.
            await _record(heir, 6)
            await _record(heir, 10)
            await _record(heir, 15)
            await asyncio.sleep(10 * POLL)
            assert not waiting.done(), f"a snapshot behind the stream was yielded: {waiting}"
            await _record(heir, 22)
            update = _update(await waiting, 22, 15)
            assert update.epoch == heir.epoch
            await _finish(heir, 30)
            rest = await _rest(events)
            _update(rest[0], 30, 22)
            end = rest[-1]
            assert isinstance(end, FollowEnd) and (end.verdict, end.index) == ("done", 30), end

        self._two(backend, body)

    @promise("protocol.follow.done")
    def test_follow_of_a_done_turn_ends_done(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            lease = await _turn(producer, key)
            await _record(lease, 7)
            await _finish(lease, 18)
            # Started after the seal: the whole answer, then the end.
            events = await _rest(_follow(reader, key))
            _update(events[0], 18, 0)
            end = events[-1]
            assert isinstance(end, FollowEnd) and len(events) == 2, events
            assert end.verdict == "done" and end.message is not None
            assert (end.message.id, end.message.content) == (MID, _text(18))
            # Sealed and released before the follower looked: still done, from the transcript.
            assert await lease.release()
            again = await _rest(_follow(reader, key, message_id=MID, start_index=18))
            assert len(again) == 1 and isinstance(again[0], FollowEnd), again
            assert again[0].verdict == "done" and again[0].message is not None

        self._two(backend, body)

    @promise("protocol.follow.errored")
    def test_follow_of_an_errored_turn_ends_errored(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            lease = await _turn(producer, key)
            await _record(lease, 8)
            events = _follow(reader, key)
            _update(await _next(events), 8, 0)
            await lease.seal("errored")
            rest = await _rest(events)
            end = rest[-1]
            assert len(rest) == 1 and isinstance(end, FollowEnd), rest
            assert (end.verdict, end.message_id, end.index) == ("errored", MID, 8), end

        self._two(backend, body)

    @promise("protocol.follow.gone")
    def test_follow_ends_gone_without_a_turn(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            assert await _rest(_follow(reader, key)) == [FollowEnd("gone")]
            lease = await _turn(producer, key)
            await _record(lease, 5)
            assert await _rest(_follow(reader, key, principal="stranger")) == [FollowEnd("gone")]
            events = _follow(reader, key)
            _update(await _next(events), 5, 0)
            assert await producer.conversations.delete(key, USER)
            assert await _rest(events) == [FollowEnd("gone", None, MID, 5)]

        self._two(backend, body)

    @promise("protocol.follow.dead")
    def test_follow_of_a_dead_producer_ends_dead(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            lease = await _turn(producer, key, SHORT)
            await _record(lease, 11)

            async def dead() -> bool | None:
                view = await reader.supervision.read(key, USER)
                return True if liveness(view, SHORT.dead_after) == "dead" else None

            await _until(dead, "the silent producer to be dead on the store clock")
            hidden = await _rest(_follow(reader, key, dead_after=SHORT.dead_after, grace=0))
            assert hidden == [FollowEnd("dead", None, MID, 0)], hidden
            shown = await _rest(
                _follow(reader, key, dead_after=SHORT.dead_after, grace=0, partial=True)
            )
            assert len(shown) == 2, shown
            _update(shown[0], 11, 0)
            assert shown[1] == FollowEnd("dead", None, MID, 11), shown

            # Within the grace the follow waits, also long past dead_after + dead_after (the
            # default grace); a takeover then streams again.
            async def long_dead() -> bool | None:
                view = await reader.supervision.read(key, USER)
                assert view.row is not None
                age = heartbeat_age(view.row, view.now)
                return True if age is not None and age > 3 * SHORT.dead_after else None

            await _until(long_dead, "the silent producer to be dead for 3 * dead_after")
            reads = _Reads(reader)
            events = _follow(reads.bundle, key, dead_after=SHORT.dead_after, grace=PATIENCE * 10)
            waiting = asyncio.ensure_future(_next(events))
            await reads.waited(waiting)
            heir = await claim(producer, key, USER, MID, lease_config=SHORT, resume_live=False)
            async with heir:  # beating, so the follower keeps judging it live
                await _record(heir, 13)
                _update(await waiting, 13, 0)
                await events.aclose()

        self._two(backend, body)

    @promise("protocol.follow.arguments")
    def test_follow_refuses_bad_arguments(self, backend: BackendUnderTest) -> None:
        async def body(stores: Stores) -> None:
            bad: object
            for bad in (-1, True, 1.5):
                await _refused("start_index", start_index=bad)
            for name in ("poll", "safety_poll", "dead_after"):
                for bad in (0, 0.0, -1, math.inf, math.nan, True, "1"):
                    await _refused(name, **{name: bad})
            for bad in (-0.5, math.inf, math.nan, True, "0"):
                await _refused("grace", grace=bad)
            for bad in ("", "a\x00b"):
                await _refused("message_id", message_id=bad)
            # grace=0 and integer seconds are fine: the follow runs (and ends gone).
            key = self.key()
            ok = follow(stores, key, USER, poll=1, dead_after=2, grace=0)
            assert await _rest(ok) == [FollowEnd("gone")]

        self.run(backend, body)

    @promise("protocol.follow.counts")
    def test_follow_counts_behind_and_skipped_snapshots(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            first = await _turn(producer, key, SHORT)
            reads = _Reads(reader)
            events = _follow(reads.bundle, key)
            waiting = asyncio.ensure_future(_next(events))
            await reads.polled(None)  # nothing recorded yet
            await _record(first, 9)
            _update(await waiting, 9, 0)

            async def polled(index: int, message: Any, message_id: str = MID) -> None:
                event = RecordedEvent(index, message, message_id, first.epoch)
                assert await producer.recording.put(key, USER, event)
                await reads.polled((message_id, index, first.epoch))

            waiting = asyncio.ensure_future(_next(events))
            await polled(12, {"text": _text(5)})  # the index is not the text's length
            await polled(14, {"answer": _text(14)})  # no text
            await polled(16, {"text": "x" * 16})  # does not extend what was streamed
            await polled(18, {"text": _text(18)}, "another")  # another message's
            assert not waiting.done(), f"a bad snapshot was streamed: {waiting}"
            await _record(first, 20)
            _update(await waiting, 20, 9)

            heir = await _take_over_when_dead(producer, key, MID)
            waiting = asyncio.ensure_future(_next(events))
            for index in (6, 10, 20):  # two behind the stream, one level with it
                await _record(heir, index)
                await reads.polled((MID, index, heir.epoch))
            assert not waiting.done(), f"a snapshot behind the stream was yielded: {waiting}"
            await heir.record(25, _text(25))  # a bare string is a snapshot too
            update = _update(await waiting, 25, 20)
            assert update.epoch == heir.epoch, update
            await _finish(heir, 25)
            rest = await _rest(events)
            assert len(rest) == 1 and isinstance(rest[0], FollowEnd), rest
            got = rest[0]
            assert (got.verdict, got.message_id, got.index) == ("done", MID, 25), got
            assert (got.behind, got.skipped) == (2, 3), got

        self._two(backend, body)

    @promise("protocol.follow.final_message")
    def test_follow_finds_the_final_message_behind_the_tail(
        self, backend: BackendUnderTest
    ) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            lease = await _turn(producer, key)
            await _record(lease, 9)
            events = _follow(reader, key)
            _update(await _next(events), 9, 0)
            # Sealed and released while the follower was not polling: the next poll finds
            # no row, and the answer in the transcript, at the epoch it last saw.
            await _finish(lease, 20)
            assert await lease.release()
            rest = await _rest(events)
            assert _update(rest[0], 20, 9).epoch == lease.epoch, rest
            assert isinstance(rest[1], FollowEnd), rest
            assert rest[1:] == [FollowEnd("done", rest[1].message, MID, 20)], rest
            # Another message after the answer: found by id behind the tail; no row seen.
            await producer.conversations.append_messages(
                key, USER, [Message("u2", "user", "next")], expected_tail=MID
            )
            again = await _rest(_follow(reader, key, message_id=MID))
            assert len(again) == 2, again
            assert _update(again[0], 20, 0).epoch == 0, again
            end = again[1]
            assert isinstance(end, FollowEnd) and end.message is not None, again
            assert (end.verdict, end.index, end.message.id) == ("done", 20, MID), end
            assert end.message.content == _text(20), end
            unknown = await _rest(_follow(reader, key, message_id="nope"))
            assert unknown == [FollowEnd("gone", None, "nope", 0)], unknown

        self._two(backend, body)

    @promise("protocol.follow.wakes")
    def test_a_write_wakes_the_follower(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(producer: Stores, reader: Stores) -> None:
            # Another bundle's writes are heard only where the backend pushes them.
            writer = producer if reader.wakeups.remote else reader
            lease = await _turn(writer, key)
            await _record(lease, 9)
            events = _follow(reader, key, poll=FAR, safety_poll=FAR)
            _update(await _next(events), 9, 0)  # the first read comes at once
            waiting = asyncio.ensure_future(_next(events))
            await asyncio.sleep(POLL)  # the follower is waiting now
            await _record(lease, 20)
            _update(await waiting, 20, 9)
            await _finish(lease, 31)
            rest = await _rest(events)
            _update(rest[0], 31, 20)
            end = rest[-1]
            assert isinstance(end, FollowEnd) and (end.verdict, end.index) == ("done", 31), rest

        self._two(backend, body)

    @pytest.mark.parametrize("fault", FAULTS)
    @promise("protocol.follow.faulty_wakeups")
    def test_faulty_wakeups_change_nothing_yielded(
        self, backend: BackendUnderTest, fault: str
    ) -> None:
        key = self.key()
        steps = list(range(4, 41, 4))

        async def body(producer: Stores, reader: Stores) -> None:
            hubs = {id(b.wakeups): b.wakeups for b in (producer, reader)}.values()
            for hub in hubs:
                _break(hub, fault)
            try:
                lease = await _turn(producer, key)
                events = _follow(reader, key, message_id=MID)
                seen = asyncio.ensure_future(_rest(events))
                for n in steps:
                    await _record(lease, n)
                    await asyncio.sleep(POLL / 4)
                await _finish(lease, 44)
                got = await seen
            finally:
                for hub in hubs:
                    vars(hub).pop("notify", None)
            updates = [e for e in got if isinstance(e, FollowUpdate)]
            assert "".join(u.delta for u in updates) == _text(44), got
            assert all(u.text == _text(u.index) for u in updates), got
            indexes = [u.index for u in updates]
            assert indexes == sorted(set(indexes)) and indexes[-1] == 44, indexes
            end = got[-1]
            assert isinstance(end, FollowEnd) and (end.verdict, end.index) == ("done", 44), end
            assert end.message is not None and end.message.content == _text(44)

        self._two(backend, body)


def _break(hub: Any, fault: str) -> None:
    """Make every wake-up through ``hub`` go wrong as ``fault`` says: never delivered,
    delivered three times (twice now, once a moment later), or delivered late by a random
    delay (so also out of order)."""
    deliver = hub.notify
    loop = asyncio.get_running_loop()
    rng = random.Random(fault)

    def notify(key: ConversationKey) -> None:
        if fault == "dropped":
            return
        if fault == "repeated":
            deliver(key)
            deliver(key)
            loop.call_later(POLL / 2, deliver, key)
            return
        loop.call_later(rng.uniform(0, 3 * POLL), deliver, key)

    hub.notify = notify


__all__ = ["FollowContract"]
