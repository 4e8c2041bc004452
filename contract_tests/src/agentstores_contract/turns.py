"""The user's side on a real backend: the conversation handle and ``conv.turn(...)``.

The handle and the turn are core code over the store ABCs; these tests prove that what
they promise holds on the backend: a turn's whole life lands in the stores, an
exception seals it ``errored``, the throttles hold back and then flush, and the lease's
epoch fences every store write the turn's task makes without passing it.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from agentstores.errors import (
    FencedError,
    InvalidKeyError,
    LeaseLostError,
    NotFoundError,
    StaleWriteError,
    UsageError,
)
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.protocol import FollowEnd, FollowUpdate, LeaseConfig, liveness
from agentstores.stores import Stores
from agentstores.stores.ambient import ambient_epoch

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .protocol import PATIENCE, SHORT, USER, _take_over_when_dead, _until
from .scenarios import check_fenced

LONG_TURN = LeaseConfig(dead_after=60.0, heartbeat_interval=1.0)
PATIENT_SHORT = replace(SHORT, heartbeat_timeout=PATIENCE)
"""Taken over 0.3 s after it stops beating, but a slow beat of its own (a loaded machine)
does not end it: the test decides when the producer goes silent."""


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
            stored = await conv.append(q1, a1, expected_tail=None, title="leases")
            assert [m.id for m in stored] == [q1.id, a1.id]
            assert await conv.append(q1) == []  # a retried send is a no-op
            await conv.append(q2, expected_tail=a1.id)
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

    @promise("handle.arguments")
    def test_handle_passes_every_argument_through(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            with pytest.raises(NotFoundError):
                await conv.append(Message.user("x"), create_if_absent=False)
            expires = (await stores.now()).replace(microsecond=0) + timedelta(days=2)
            await conv.append(
                Message.user("q", id="q"),
                expected_tail=None,
                title="t0",
                expires_at=expires,
                last_turn_status="running",
            )
            info = await conv.info()
            assert info is not None and (info.title, info.expires_at) == ("t0", expires)
            assert info.last_turn_status == "running"
            with pytest.raises(StaleWriteError):
                await conv.append(Message.user("r"), expected_tail="not-the-tail")
            await conv.set_title("t1")
            assert (await conv.info() or info).title == "t1"
            await conv.append(Message.assistant(" \n", id="blank"), Message.assistant("a", id="a"))
            assert [m.id for m in await conv.rehydrate(5)] == ["q", "a"]
            assert [m.id for m in await conv.history()] == ["q", "blank", "a"]
            assert [m.id for m in await conv.messages(start=1, limit=1)] == ["blank"]
            found = await conv.message(0, speaker="assistant")
            assert found is not None and found.id == "blank"
            found = await conv.message(-1, speaker="user")
            assert found is not None and found.id == "q"
            rows = await conv.transcript()
            assert [r.id for r in rows] == ["q", "blank", "a"]
            assert [r.id for r in await conv.transcript(limit=2)] == ["q", "blank"]
            assert [r.id for r in await conv.transcript(speaker="user")] == ["q"]
            before = rows[0].created_at - timedelta(days=2)
            assert await conv.transcript(time_range=(before, before + timedelta(days=1))) == []
            named = await conv.branch("a", session_id="named-branch")
            assert named.key == ConversationKey(key.tenant, "named-branch")
            with pytest.raises(StaleWriteError):
                await conv.truncate("blank", cut="after", expected_tail="blank")
            assert await conv.truncate("blank", cut="after", expected_tail="a") == 1
            assert [m.id for m in await conv.messages()] == ["q", "blank"]
            stranger = stores.conversation(key, "stranger")
            assert await stranger.rehydrate(5) == [] and await stranger.history() == []

        self.run(backend, body)

    @promise("handle.arguments")
    def test_handle_follow_and_retried_turns(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            assert await conv.rehydrate(1) == []
            question = Message.user("q", id="q")
            with pytest.raises(_Boom):
                async with conv.turn(
                    "d1", user=question, lease_config=SHORT, stream_every=0
                ) as turn:
                    await turn.stream("half")
                    await turn.lease.stop_heartbeat()  # the producer hangs

                    async def dead() -> bool | None:
                        view = await stores.supervision.read(key, USER)
                        return True if liveness(view, SHORT.dead_after) == "dead" else None

                    await _until(dead, "the hung producer to be seen dead")
                    hidden = [
                        e
                        async for e in conv.follow(
                            dead_after=0.3, grace=0, poll=0.05, safety_poll=0.05
                        )
                    ]
                    assert [type(e) for e in hidden] == [FollowEnd]
                    assert isinstance(hidden[0], FollowEnd) and hidden[0].verdict == "dead"
                    shown = [
                        e
                        async for e in conv.follow(
                            partial=True, dead_after=0.3, grace=0, poll=0.05, safety_poll=0.05
                        )
                    ]
                    assert isinstance(shown[0], FollowUpdate) and shown[0].text == "half"
                    assert isinstance(shown[-1], FollowEnd) and shown[-1].verdict == "dead"
                    # The client retries its send: the same turn, the same message, the same
                    # tail it saw; the retry takes the turn over and appends nothing twice.
                    async with conv.turn(
                        "d1", user=question, expected_tail=None, lease_config=SHORT
                    ) as retry:
                        assert retry.epoch > turn.epoch and retry.reason in ("dead", "resume")
                        await retry.stream("whole")
                    raise _Boom
            assert [(m.id, m.content) for m in await conv.messages()] == [
                ("q", "q"),
                ("d1", "whole"),
            ]
            assert [m.id for m in await conv.rehydrate(1)] == ["d1"]

        self.run(backend, body)

    @promise("protocol.turn.arguments")
    def test_turn_passes_its_arguments_through(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            for name in ("stream_every", "checkpoint_every"):
                for bad in (-1, True, "1"):
                    wrong: dict[str, Any] = {name: bad}
                    with pytest.raises(UsageError, match=name):
                        conv.turn("t", **wrong)
            conv.turn("t", stream_every=0, checkpoint_every=0)  # every call writes
            with pytest.raises(InvalidKeyError, match="message_id"):
                conv.turn("")
            expires = (await stores.now()).replace(microsecond=0) + timedelta(days=3)
            async with conv.turn(
                user=Message.user("q", id="q"),
                expected_tail=None,
                title="T",
                expires_at=expires,
                lease_config=LONG_TURN,
                stream_every=3600.0,
                checkpoint_every=3600.0,
            ) as turn:
                assert len(turn.message_id) == 32 and turn.lease.config is LONG_TURN
                with pytest.raises(UsageError, match="agent state"):
                    await turn.checkpoint({"x": object()})
            info = await conv.info()
            assert info is not None and (info.title, info.expires_at) == ("T", expires)
            with pytest.raises(StaleWriteError):
                async with conv.turn("stale", expected_tail="not-the-tail"):
                    raise AssertionError("a stale turn must not start")

            # Nothing streamed, no reply: no answer appended, the turn still completes.
            await conv.append(Message.user("q2", id="q2"), last_turn_status="running")
            async with conv.turn("quiet"):
                pass
            info = await conv.info()
            assert info is not None and info.last_turn_status == "complete"
            assert info.tail_message_id == "q2"
            view = await stores.supervision.read(key, USER)
            assert view.row is not None and (view.row.message_id, view.row.status) == (
                "quiet",
                "done",
            )

            async with conv.turn("r1") as turn:
                await turn.stream("draft")
                stored = await turn.reply("final", metadata={"k": 1})
                assert stored is not None and (stored.id, stored.content) == ("r1", "final")
                assert stored.metadata == {"k": 1}
                with pytest.raises(UsageError):
                    await turn.reply("again")
            assert [m.id for m in await conv.messages()][-1] == "r1"
            await conv.append(Message.assistant("earlier", id="r2"))
            async with conv.turn("r2") as turn:
                assert await turn.reply("retried") is None  # the answer is already there
            last = await conv.message(-1)
            assert last is not None and (last.id, last.content) == ("r2", "earlier")

        self.run(backend, body)

    @promise("protocol.turn.lifecycle")
    def test_clean_turn(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            question = Message.user("tell me a story")
            async with conv.turn("answer-1", user=question, expected_tail=None) as turn:
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
            assert isinstance(events[0], FollowUpdate) and events[0].delta == "Once upon a time"
            later = [e async for e in conv.follow(4, message_id="answer-1", poll=0.05)]
            assert isinstance(later[0], FollowUpdate) and later[0].delta == " upon a time"
            other = [e async for e in conv.follow(message_id="never-ran", poll=0.05)]
            assert isinstance(other[-1], FollowEnd) and other[-1].verdict == "gone"
            with pytest.raises(LeaseLostError):
                await turn.stream("Once upon a time, late")

            # The next turn claims over the sealed row; an explicit reply wins.
            async with conv.turn(
                "answer-2", user=Message.user("shorter"), expected_tail="answer-1"
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
                "slow", stream_every=3600.0, checkpoint_every=3600.0, lease_config=LONG_TURN
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

            await self._timer_flushes_the_pending_snapshot(stores)

        self.run(backend, body)

    async def _timer_flushes_the_pending_snapshot(self, stores: Stores) -> None:
        """An offer made too soon is written by a timer once the interval ends, with no
        further call; a timer's failed write is raised by the next call."""
        key = self.key()
        conv = stores.conversation(key, USER)
        every = 1.0
        loop = asyncio.get_running_loop()

        async def recorded() -> str | None:
            record = await stores.recording.read(key, USER)
            return record.message["text"] if record is not None else None

        with pytest.raises(LeaseLostError):  # the last call below, then the exit
            async with conv.turn("quick", stream_every=every, lease_config=PATIENT_SHORT) as turn:
                text, held_back = "", False
                for _ in range(5):  # a pause longer than `every` between two calls proves nothing
                    text += "x"
                    await turn.stream(text)
                    started = loop.time()
                    await turn.stream(text + "y")
                    if loop.time() - started < every / 2 and await recorded() == text:
                        held_back = True
                        break
                    await asyncio.sleep(every)
                assert held_back, "no stream call was ever held back by stream_every"
                wanted = text + "y"

                async def flushed() -> bool | None:
                    return True if await recorded() == wanted else None

                assert await _until(flushed, "the pending snapshot to be flushed by its timer")
                record = await stores.recording.read(key, USER)
                assert record is not None and record.index == len(wanted)

                # Another producer takes over: the held-back snapshot's timer write is refused,
                # which ends the lease, and the next call says so.
                await turn.lease.stop_heartbeat()
                successor = await _take_over_when_dead(stores, key, "quick")
                with contextlib.suppress(LeaseLostError):
                    await turn.stream(wanted + "z")  # held back, or refused at once

                async def lost() -> bool | None:
                    return True if turn.lost.is_set() else None

                assert await _until(lost, "the timer's fenced write to end the lease")
                await turn.stream(wanted + "zz")
        assert await recorded() == wanted
        await successor.release()

    @promise("protocol.turn.ambient_epoch")
    def test_ambient_epoch_fences_plain_writes(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, USER)
            await conv.append(Message.user("q0", id="q0"))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + PATIENCE
            with pytest.raises(LeaseLostError):
                async with conv.turn(
                    "a1", user=Message.user("q1", id="q1"), lease_config=SHORT
                ) as turn:
                    epoch = turn.epoch
                    assert ambient_epoch(key) == epoch
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
                        "set_metadata": lambda: stores.conversations.set_metadata(
                            key, USER, {"by": "zombie"}
                        ),
                        "append_messages(metadata)": lambda: conv.append(metadata={"by": "zombie"}),
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
