"""The user's side on a real backend: the conversation handle and ``conv.turn(...)``.

The handle and the turn are core code over the store ABCs; these tests prove that what
they promise holds on the backend: a turn's whole life lands in the stores, an
exception seals it ``errored``, the throttles hold back and then flush, and the lease's
epoch fences every store write the turn's task makes without passing it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from agentstores.errors import FencedError, LeaseLostError
from agentstores.models import Message
from agentstores.protocol import FollowEnd, FollowUpdate, LeaseConfig
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise, register_promise
from .protocol import PATIENCE, SHORT, USER, _take_over_when_dead, _until
from .scenarios import check_fenced

for _name, _text in {
    "handle.reads": "a conversation handle reads, shares, truncates, branches and erases "
    "exactly what the store API does, as its principal",
    "protocol.turn.lifecycle": "a clean turn appends the user message and the streamed answer "
    "under its id, records complete, seals done and drops the recording",
    "protocol.turn.errored": "a turn that raises keeps the user message, records and seals "
    "errored and drops the recording",
    "protocol.turn.throttle": "a turn's stream and checkpoint write at most once per interval "
    "and flush the latest value when the interval ends",
    "protocol.turn.ambient_epoch": "inside a turn, store writes without an epoch carry the "
    "lease's (tasks it starts too); after a takeover they are fenced and land nothing",
}.items():
    register_promise(_name, _text)

LONG_TURN = LeaseConfig(dead_after=60.0, heartbeat_interval=1.0)


class _Boom(Exception):
    """The producer's own failure."""


class TurnContract(ContractBase):
    @promise("handle.reads")
    def test_handle_reads_and_writes(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            q1, a1 = Message.user("what is a lease?"), Message.assistant("one row per turn")
            q2 = Message.user("and a fence?")
            assert q1.id != q2.id and q1.role == "user" and a1.role == "assistant"
            stored = await conv.append(q1, a1, expect_tail=None, title="leases")
            assert [m.id for m in stored] == [q1.id, a1.id]
            assert await conv.append(q1) == []  # a retried send is a no-op
            await conv.append(q2, expect_tail=a1.id)
            first = await conv.message(0, speaker="user")
            assert first is not None and first.content == "what is a lease?"
            last = await conv.message(-1)
            assert last is not None and last.id == q2.id
            assert await conv.message(3) is None
            assert [m.id for m in await conv.transcript(speaker="assistant")] == [a1.id]
            assert [m.id for m in await conv.recent(2)] == [a1.id, q2.id]
            assert [m.seq for m in await conv.messages(start=1)] == [1, 2]
            info = await conv.info()
            assert info is not None and info.owner == USER and info.title == "leases"
            assert info.tail_message_id == q2.id and info.message_count == 3

            stranger = stores.conversation(key, "stranger")
            assert await stranger.info() is None and await stranger.message(0) is None
            await conv.share("stranger")
            assert [m.id for m in await stranger.recent(5)] == [q1.id, a1.id, q2.id]
            await conv.unshare("stranger")
            assert await stranger.recent(5) == []

            branch = await conv.branch(a1.id)
            assert branch.key != key and branch.principal == USER
            assert [m.content for m in await branch.messages()] == [q1.content, a1.content]
            assert await conv.truncate(q2.id) == 1
            assert (await conv.info() or info).message_count == 2
            assert await conv.delete() is True
            assert await conv.info() is None
            assert await branch.info() is not None

        self.run(backend, body)

    @promise("protocol.turn.lifecycle")
    def test_clean_turn(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            question = Message.user("tell me a story")
            async with conv.turn("answer-1", user=question, expect_tail=None) as turn:
                assert turn.epoch >= 1 and turn.reason == "new"
                for text in ("Once", "Once upon", "Once upon a time"):
                    await turn.stream(text)
                await turn.checkpoint({"position": 3})
                view = await stores.supervision.read(key, USER)
                assert view.row is not None and view.row.status == "running"
                assert view.row.message_id == "answer-1" and view.row.epoch == turn.epoch
                record = await stores.recording.read(key, USER)
                assert record is not None and record.message_id == "answer-1"
            messages = await conv.messages()
            assert [(m.id, m.role, m.content) for m in messages] == [
                (question.id, "user", "tell me a story"),
                ("answer-1", "assistant", "Once upon a time"),
            ]
            info = await conv.info()
            assert info is not None and info.last_turn_status == "complete"
            view = await stores.supervision.read(key, USER)
            assert view.row is not None and (view.row.status, view.row.epoch) == (
                "done",
                turn.epoch,
            )
            assert await stores.recording.read(key, USER) is None
            assert await conv.state() == {"position": 3}
            # A screen that arrives after the end gets the verdict and the answer at once.
            events = [event async for event in conv.follow(poll=0.05)]
            assert len(events) == 2 and isinstance(events[-1], FollowEnd)
            assert (events[-1].verdict, events[-1].message_id) == ("done", "answer-1")
            assert isinstance(events[0], FollowUpdate) and events[0].text == "Once upon a time"
            with pytest.raises(LeaseLostError):
                await turn.stream("Once upon a time, late")

            # The next turn claims over the sealed row; an explicit reply wins.
            async with conv.turn(
                "answer-2", user=Message.user("shorter"), expect_tail="answer-1"
            ) as second:
                assert second.reason == "sealed" and second.epoch > turn.epoch
                await second.stream("draft")
                await second.reply({"text": "final", "parts": [1, 2]})
            last = await conv.message(-1)
            assert last is not None and last.id == "answer-2"
            assert last.content == {"text": "final", "parts": [1, 2]}

        self.run(backend, body)

    @promise("protocol.turn.errored")
    def test_turn_that_raises(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            question = Message.user("fail please")
            with pytest.raises(_Boom):
                async with conv.turn("answer-1", user=question) as turn:
                    await turn.stream("partial")
                    raise _Boom
            assert [m.id for m in await conv.messages()] == [question.id]
            info = await conv.info()
            assert info is not None and info.last_turn_status == "errored"
            view = await stores.supervision.read(key, USER)
            assert view.row is not None and view.row.status == "errored"
            assert view.row.epoch == turn.epoch
            assert await stores.recording.read(key, USER) is None

        self.run(backend, body)

    @promise("protocol.turn.throttle")
    def test_throttles(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)

            async def recorded() -> str | None:
                record = await stores.recording.read(key, USER)
                return record.message["text"] if record is not None else None

            async with conv.turn(
                "slow", stream_every=3600.0, checkpoint_every=3600.0, lease=LONG_TURN
            ) as turn:
                await turn.stream("a")
                await turn.checkpoint({"n": 1})
                for text in ("ab", "abc", "abcd"):
                    await turn.stream(text)
                await turn.checkpoint({"n": 2})
                # The first of each was written at once; the rest wait out the hour.
                assert await recorded() == "a"
                assert await conv.state() == {"n": 1}
            # Leaving the turn flushes what was pending before the answer lands.
            assert await conv.state() == {"n": 2}
            last = await conv.message(-1)
            assert last is not None and last.content == "abcd"

            key2 = self.key()
            conv2 = stores.conversation(key2, USER)
            async with conv2.turn("quick", stream_every=0.2, lease=LONG_TURN) as turn2:
                await turn2.stream("x")
                await turn2.stream("xy")  # too soon: a timer writes it when the time comes

                async def flushed() -> bool | None:
                    record = await stores.recording.read(key2, USER)
                    text = record.message["text"] if record is not None else None
                    return True if text == "xy" else None

                assert await _until(flushed, "the pending snapshot to be flushed")
                assert (await stores.recording.read(key2, USER)).index == 2  # type: ignore[union-attr]

        self.run(backend, body)

    @promise("protocol.turn.ambient_epoch")
    def test_ambient_epoch_fences_plain_writes(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            await conv.append(Message.user("q0", id="q0"))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + PATIENCE
            with pytest.raises(LeaseLostError):
                async with conv.turn("a1", user=Message.user("q1", id="q1"), lease=SHORT) as turn:
                    epoch = turn.epoch
                    # A plain write made in the turn carries the epoch and raises the fence.
                    await stores.state.save(key, USER, {"by": "turn"})
                    assert (await stores.supervision.read(key, USER)).fence >= epoch
                    # Freeze the heartbeat: another producer takes over.
                    await turn.lease.stop_heartbeat()
                    successor = await _take_over_when_dead(stores, key, "a1")
                    assert successor.epoch > epoch
                    expires = await stores.now() + timedelta(hours=1)
                    writes: dict[str, Any] = {
                        "state.save": lambda: stores.state.save(key, USER, {"by": "zombie"}),
                        "state.delete": lambda: stores.state.delete(key, USER),
                        "append_messages": lambda: stores.conversations.append_messages(
                            key, USER, [Message("zombie", "assistant", "late")]
                        ),
                        "set_last_turn_status": lambda: stores.conversations.set_last_turn_status(
                            key, USER, "errored"
                        ),
                        "set_title": lambda: stores.conversations.set_title(key, USER, "zombie"),
                        "truncate": lambda: stores.conversations.truncate(key, USER, "q1"),
                        "recording.delete": lambda: stores.recording.delete(key, USER, "a1"),
                        "pause_tokens.put": lambda: stores.pause_tokens.put(
                            "zombie-token", key, USER, {}, expires_at=expires
                        ),
                    }
                    for name, write in writes.items():
                        with pytest.raises(FencedError) as raised:
                            await write()
                        check_fenced(raised.value, epoch, f"a zombie turn's plain {name}")

                    async def child() -> None:
                        await stores.state.save(key, USER, {"by": "zombie child"})

                    with pytest.raises(FencedError):
                        await asyncio.create_task(child())
                    assert loop.time() < deadline
                    await turn.stream("late")  # the lease is lost: LeaseLostError
            assert turn.lost.is_set()
            assert await stores.state.load(key, USER) == {"by": "turn"}
            assert [m.id for m in await conv.messages()] == ["q0", "q1"]
            # Outside any turn, a plain write carries no epoch and is not fenced.
            await stores.conversations.set_title(key, USER, "after")
            await successor.release()

        self.run(backend, body)
