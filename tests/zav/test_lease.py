"""The SDK's lease on agentstores' fence: later turns work, a stale producer writes nothing,
and heartbeats are judged on one clock. Each task plays an SDK request or producer, making
the calls the SDK's ``ResumableChatStreams`` and chat handler make, in the same order."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from zav.agents_sdk.adapters.stream_buffer import LocalFileChatStreamSupervisionStore
from zav.agents_sdk.adapters.stream_buffer.resumable_chat_streams import classify_supervision
from zav.agents_sdk.domain.chat_conversation_store import ConversationNotOwnedError
from zav.agents_sdk.domain.chat_message import ChatMessage
from zav.agents_sdk.domain.chat_stream_recording_store import RecordedStreamEvent
from zav.agents_sdk.domain.chat_stream_supervision_store import (
    ChatStreamStatus,
    ChatStreamSupervision,
)

from agentstores import ConversationKey, FencedError, SupervisionRow
from agentstores_zav import (
    AgentStoresConversationStore,
    AgentStoresRecordingStore,
    AgentStoresStateStore,
    AgentStoresSupervisionStore,
    Bundle,
)

TENANT, USER = "acme", "u1"
RUNNING, DONE = ChatStreamStatus.RUNNING, ChatStreamStatus.DONE


class Replica:
    """One API server's stores (its own bundle, optionally its own skewed clock)."""

    def __init__(self, bundle: Bundle, clock: Any = time.time) -> None:
        self.bundle = bundle
        self.supervision = AgentStoresSupervisionStore(bundle, clock=clock)
        self.recording = AgentStoresRecordingStore(bundle)
        self.state = AgentStoresStateStore(bundle)
        self.conversations = AgentStoresConversationStore(bundle)
        self.clock = clock

    async def claim(self, sid: str, turn: str) -> int | None:
        """``ResumableChatStreams.__claim``: read, then swap in the next epoch."""
        current = await self.supervision.read(TENANT, USER, sid)
        if (
            current is not None
            and current.message_id != turn
            and classify_supervision(current, current.message_id, self.clock(), 3.0) is None
        ):
            return None
        expected = current.epoch if current is not None else None
        epoch = current.epoch + 1 if current is not None else 0
        row = ChatStreamSupervision(RUNNING, self.clock(), turn, epoch)
        ok = await self.supervision.compare_and_swap(TENANT, USER, sid, expected, row)
        return epoch if ok else None

    async def beat(self, sid: str, turn: str, epoch: int, status: Any = RUNNING) -> bool:
        row = ChatStreamSupervision(status, self.clock(), turn, epoch)
        return await self.supervision.compare_and_swap(TENANT, USER, sid, epoch, row)

    async def produce(self, sid: str, turn: str, epoch: int, text: str) -> None:
        """The chat handler's writes during a turn: user turn, state, recording, answer."""
        await self.conversations.append_messages(
            TENANT,
            USER,
            sid,
            "agent",
            [ChatMessage.as_user(f"q {turn}")],
            last_turn_status="running",
        )
        await self.state.save(TENANT, USER, sid, {"dep": {"text": text}})
        event = RecordedStreamEvent(len(text), ChatMessage.as_bot(text), turn, epoch)
        await self.recording.put(TENANT, USER, sid, event)

    async def finish(self, sid: str, turn: str, epoch: int, text: str) -> None:
        """Bot turn appended, sealed DONE, then the SDK's reap deletes both rows."""
        await self.conversations.append_messages(
            TENANT, USER, sid, "agent", [ChatMessage.as_bot(text)], create_if_absent=False
        )
        assert await self.beat(sid, turn, epoch, DONE)
        await self.supervision.delete(TENANT, USER, sid, turn, epoch)
        await self.recording.delete(TENANT, USER, sid, turn)


def replicas(url: str, n: int = 2, clocks: list[Any] | None = None) -> list[Replica]:
    clocks = clocks or [time.time] * n
    return [Replica(Bundle(url), clock) for clock in clocks]


async def close(*rs: Replica) -> None:
    for r in rs:
        await r.bundle.close()


async def run_turn(replica: Replica, sid: str, turn: str) -> None:
    """One whole turn in its own task (request, then producer), as the SDK runs it."""

    async def request() -> None:
        epoch = await replica.claim(sid, turn)
        assert epoch == 0  # the SDK always claims a free slot at epoch 0

        async def producer() -> None:
            assert await replica.beat(sid, turn, epoch)
            await replica.produce(sid, turn, epoch, f"answer {turn}")
            await replica.finish(sid, turn, epoch, f"answer {turn}")

        await asyncio.create_task(producer())

    await asyncio.create_task(request())


async def test_later_turns_work_after_the_sdk_deletes_its_rows(url: str) -> None:
    (a, b) = replicas(url)
    sid = uuid.uuid4().hex
    try:
        for i, replica in enumerate([a, b, a]):
            await run_turn(replica, sid, f"turn-{i}")
        transcript = await a.conversations.get_transcript(TENANT, USER, sid)
        assert [m.content for m in transcript] == [
            "q turn-0",
            "answer turn-0",
            "q turn-1",
            "answer turn-1",
            "q turn-2",
            "answer turn-2",
        ]
        # What a naive mapping does: the SDK's epoch 0, straight to the store, is refused.
        stores = await a.bundle.stores()
        naive = SupervisionRow("running", "turn-3", 0)
        key = ConversationKey(TENANT, sid)
        assert not await stores.supervision.compare_and_swap(key, USER, None, naive)
    finally:
        await close(a, b)


async def test_a_frozen_producer_woken_after_a_takeover_writes_nothing(url: str) -> None:
    (a, b) = replicas(url)
    sid, turn = uuid.uuid4().hex, "turn-0"
    frozen, woken = asyncio.Event(), asyncio.Event()
    results: dict[str, Any] = {}
    try:

        async def zombie_request() -> None:
            epoch = await a.claim(sid, turn)
            assert epoch == 0

            async def producer() -> None:
                assert await a.beat(sid, turn, epoch)
                await a.produce(sid, turn, epoch, "zombie partial")
                frozen.set()
                await woken.wait()  # SIGSTOP: no heartbeat, then woken after a takeover
                results["beat"] = await a.beat(sid, turn, epoch)
                for name, write in {
                    "state": a.state.save(TENANT, USER, sid, {"dep": {"text": "zombie"}}),
                    "append": a.conversations.append_messages(
                        TENANT,
                        USER,
                        sid,
                        "agent",
                        [ChatMessage.as_bot("zombie")],
                        create_if_absent=False,
                    ),
                    "status": a.conversations.set_last_turn_status(TENANT, USER, sid, "errored"),
                    "state_delete": a.state.delete(TENANT, USER, sid),
                }.items():
                    try:
                        await write
                        results[name] = "written"
                    except FencedError:
                        results[name] = "fenced"
                event = RecordedStreamEvent(99, ChatMessage.as_bot("zombie"), turn, epoch)
                await a.recording.put(TENANT, USER, sid, event)  # dropped, as the SDK's own
                await a.recording.delete(TENANT, USER, sid, turn)
                await a.supervision.delete(TENANT, USER, sid, turn, epoch)

            await asyncio.create_task(producer())

        zombie = asyncio.create_task(zombie_request())
        await frozen.wait()
        await asyncio.sleep(3.2)  # the zombie's heartbeat goes stale

        async def takeover() -> None:
            # The perf client's resume: the same turn, claimed at the next epoch.
            epoch = await b.claim(sid, turn)
            assert epoch is not None and epoch >= 1
            results["taken_at"] = epoch
            await b.state.save(TENANT, USER, sid, {"dep": {"text": "successor"}})
            event = RecordedStreamEvent(5, ChatMessage.as_bot("successor answer"), turn, epoch)
            await b.recording.put(TENANT, USER, sid, event)

        await asyncio.create_task(takeover())
        woken.set()
        await zombie
        assert results["beat"] is False
        assert {results[n] for n in ("state", "append", "status", "state_delete")} == {"fenced"}
        assert await b.state.load(TENANT, USER, sid) == {"dep": {"text": "successor"}}
        recorded = await b.recording.read(TENANT, USER, sid)
        assert recorded is not None and recorded.message.content == "successor answer"
        row = await b.supervision.read(TENANT, USER, sid)
        assert row is not None and row.epoch == results["taken_at"]
        transcript = await b.conversations.get_transcript(TENANT, USER, sid)
        assert [m.content for m in transcript] == ["q turn-0"]
        stores = await b.bundle.stores()
        info = await stores.conversations.get_conversation(ConversationKey(TENANT, sid), USER)
        assert info is not None and info.last_turn_status == "running"

        async def successor_finishes() -> None:
            epoch = await b.claim(sid, turn)  # a fresh request resumes (same turn, next epoch)
            assert epoch is not None
            await b.finish(sid, turn, epoch, "successor")

        await asyncio.create_task(successor_finishes())
        # And the conversation goes on: the next turn claims at epoch 0 again.
        await run_turn(a, sid, "turn-1")
        transcript = await a.conversations.get_transcript(TENANT, USER, sid)
        assert [m.content for m in transcript] == [
            "q turn-0",
            "successor",
            "q turn-1",
            "answer turn-1",
        ]
    finally:
        await close(a, b)


@pytest.mark.parametrize("skew", [-30.0, 30.0])
async def test_clock_skew_between_replicas_cannot_fake_a_dead_producer(
    url: str, skew: float
) -> None:
    (producer, reader) = replicas(url, clocks=[lambda: time.time() + skew, time.time])
    sid, turn = uuid.uuid4().hex, "turn-0"
    try:

        async def claim() -> None:
            assert await producer.claim(sid, turn) == 0
            assert await producer.beat(sid, turn, 0)

        await asyncio.create_task(claim())
        seen = await reader.supervision.read(TENANT, USER, sid)
        assert classify_supervision(seen, turn, time.time(), 3.0) is None  # live
        # ... and the reader refuses a second turn instead of taking the live one over.
        assert await reader.claim(sid, "turn-1") is None
    finally:
        await close(producer, reader)


async def test_the_sdks_own_file_store_is_fooled_by_the_same_skew(tmp_path: Path) -> None:
    """The contrast: the SDK's file store keeps the producer's clock, so a producer whose
    clock is 30 s behind looks dead to every other replica the moment it beats."""
    store = LocalFileChatStreamSupervisionStore(base_path=str(tmp_path / "supervision"))
    row = ChatStreamSupervision(RUNNING, time.time() - 30.0, "turn-0", 0)
    assert await store.compare_and_swap(TENANT, USER, "s", None, row)
    seen = await store.read(TENANT, USER, "s")
    assert classify_supervision(seen, "turn-0", time.time(), 3.0) == "dead"


async def test_another_requester_cannot_claim_or_write(url: str) -> None:
    (a,) = replicas(url, n=1)
    sid = uuid.uuid4().hex
    try:
        await run_turn(a, sid, "turn-0")
        row = ChatStreamSupervision(RUNNING, time.time(), "turn-x", 0)
        with pytest.raises(ConversationNotOwnedError):
            await a.supervision.compare_and_swap(TENANT, "intruder", sid, None, row)
        with pytest.raises(ConversationNotOwnedError):
            await a.state.save(TENANT, "intruder", sid, {"x": {}})
    finally:
        await close(a)


async def test_a_follower_across_a_takeover_sees_the_answer_grow_to_its_end(url: str) -> None:
    """The successor restarts its indices at 0 from an older checkpoint: its snapshots are
    held back until they pass the predecessor's, then continue above its index."""
    (a, b) = replicas(url)
    sid, turn = uuid.uuid4().hex, "turn-0"
    try:

        async def first() -> None:
            assert await a.claim(sid, turn) == 0
            for i in range(6):  # w0 .. w5 at indices 0 .. 5
                text = " ".join(f"w{n}" for n in range(i + 1))
                await a.recording.put(
                    TENANT, USER, sid, RecordedStreamEvent(i, ChatMessage.as_bot(text), turn, 0)
                )

        await asyncio.create_task(first())
        seen = [(await b.recording.read(TENANT, USER, sid))]
        await asyncio.sleep(3.2)

        async def successor() -> None:
            epoch = await b.claim(sid, turn)
            assert epoch is not None
            for i in range(8):  # resumed from w3: w0..w3, w0..w4, ... w0..w10
                text = " ".join(f"w{n}" for n in range(i + 4))
                event = RecordedStreamEvent(i, ChatMessage.as_bot(text), turn, epoch)
                await b.recording.put(TENANT, USER, sid, event)
                seen.append(await b.recording.read(TENANT, USER, sid))

        await asyncio.create_task(successor())
        indices = [r.index for r in seen if r is not None]
        contents = [r.message.content for r in seen if r is not None]
        assert indices == sorted(indices) and indices[-1] > 5
        assert all(y.startswith(x) for x, y in itertools.pairwise(contents))
        assert contents[-1] == " ".join(f"w{n}" for n in range(11))
    finally:
        await close(a, b)
