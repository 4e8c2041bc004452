"""Stopping the in-flight turn from another bundle (a replica): the producer is fenced and
stops, the partial answer kept is exactly its last recorded snapshot, followers end done."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable

import pytest

from agentstores.conversation import Conversation
from agentstores.errors import LeaseLostError, NotOwnedError
from agentstores.keys import ConversationKey
from agentstores.memory.stores import EphemeralStoreWarning, MemoryStores
from agentstores.models import Message
from agentstores.protocol import FollowEnd, FollowUpdate, LeaseConfig, stop_turn

USER = "alice"
CONFIG = LeaseConfig(dead_after=3.0, heartbeat_interval=1.0)
WAIT = 10.0


async def produce(conv: Conversation, recorded: list[str], started: asyncio.Event) -> None:
    """Stream words until stopped; ``recorded`` gets each text the store accepted."""
    async with conv.turn("a1", user=Message.user("q", id="u1"), stream_every=0) as turn:
        text = ""
        for i in range(100_000):
            text += f"w{i} "
            await turn.stream(text)  # stream_every=0: every call is one recording write
            recorded.append(text)
            if len(recorded) == 5:
                started.set()
            await asyncio.sleep(0.001)


@pytest.fixture
async def replica(bundle: Callable[[], MemoryStores]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        async with bundle() as other:
            yield other


async def test_stop_from_another_replica_keeps_the_last_snapshot(
    stores: MemoryStores, replica: MemoryStores, key: ConversationKey
):
    recorded: list[str] = []
    started = asyncio.Event()
    producer = asyncio.create_task(produce(stores.conversation(key, USER), recorded, started))
    await asyncio.wait_for(started.wait(), WAIT)
    follower = stores.conversation(key, USER).follow(message_id="a1", poll=0.005)
    first = await asyncio.wait_for(anext(follower), WAIT)
    assert isinstance(first, FollowUpdate)

    kept = await replica.conversation(key, USER).stop()

    with pytest.raises(LeaseLostError):
        await asyncio.wait_for(producer, WAIT)
    assert kept is not None and kept.id == "a1" and kept.role == "assistant"
    assert kept.content == recorded[-1]
    events = [e async for e in follower]
    end = events[-1]
    assert isinstance(end, FollowEnd) and end.verdict == "done"
    assert end.message is not None and end.message.content == recorded[-1]
    streamed = first.text + "".join(e.delta for e in events if isinstance(e, FollowUpdate))
    assert streamed == recorded[-1]
    info = await stores.conversation(key, USER).info()
    assert (
        info is not None and info.last_turn_status == "cancelled" and info.tail_message_id == "a1"
    )
    assert await stores.recording.read(key, USER) is None
    assert [m.id for m in await stores.conversation(key, USER).messages()] == ["u1", "a1"]
    # A second stop finds nothing in flight and changes nothing.
    assert await stop_turn(replica, key, USER) is None
    assert len(await stores.conversation(key, USER).messages()) == 2


async def test_stop_with_nothing_in_flight(stores: MemoryStores, key: ConversationKey):
    conv = stores.conversation(key, USER)
    assert await conv.stop() is None
    async with conv.turn("a1", user=Message.user("q", id="u1")) as turn:
        await turn.stream("done")
    assert await conv.stop() is None
    info = await conv.info()
    assert info is not None and info.last_turn_status == "complete"


async def test_stop_names_the_turn(stores: MemoryStores, key: ConversationKey):
    conv = stores.conversation(key, USER)
    turn = conv.turn("a1", user=Message.user("q", id="u1"), stream_every=0)
    with pytest.raises(LeaseLostError):  # the producer's next write is refused
        async with turn:
            await turn.stream("partial")
            assert await conv.stop("other") is None
            kept = await conv.stop("a1")
            assert kept is not None and kept.content == "partial"
            await turn.stream("partial and more")
    info = await conv.info()
    assert info is not None and info.last_turn_status == "cancelled"


async def test_stop_after_the_answer_landed_keeps_it(stores: MemoryStores, key: ConversationKey):
    conv = stores.conversation(key, USER)
    turn = conv.turn("a1", user=Message.user("q", id="u1"), stream_every=0)
    with pytest.raises(LeaseLostError):  # its seal is refused: the stop sealed
        async with turn:
            await turn.stream("the whole answer")
            await turn.reply()
            kept = await conv.stop()
            assert kept is not None and kept.content == "the whole answer"
    info = await conv.info()
    assert info is not None and info.last_turn_status == "complete"


async def test_only_the_owner_stops(stores: MemoryStores, key: ConversationKey):
    conv = stores.conversation(key, USER)
    turn = conv.turn("a1", user=Message.user("q", id="u1"), stream_every=0)
    async with turn:
        await turn.stream("mine")
        await conv.share("bob")
        assert await stores.conversation(key, "mallory").stop() is None  # sees no turn
        with pytest.raises(NotOwnedError):  # sees it, may not write
            await stores.conversation(key, "bob").stop()
        await turn.stream("mine, still")
    info = await conv.info()
    assert info is not None and info.last_turn_status == "complete"
