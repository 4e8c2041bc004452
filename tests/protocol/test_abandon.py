"""A turn left for a standby (``Turn.abandon``) and taken over by adopting the standby's
lease (``Turn(lease=..., text=...)``): nothing sealed or dropped, the answer finished."""

from __future__ import annotations

import pytest

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.memory.stores import MemoryStores
from agentstores.models import Message
from agentstores.protocol import LeaseConfig, Turn, claim, liveness

from .conftest import ManualClock

USER = "alice"
CONFIG = LeaseConfig(dead_after=3.0, heartbeat_interval=1.0)


async def test_abandoned_turn_is_taken_over_and_finished(
    stores: MemoryStores, key: ConversationKey, clock: ManualClock
):
    conv = stores.conversation(key, USER)
    async with conv.turn("a1", user=Message.user("q", id="u1"), lease_config=CONFIG) as turn:
        await turn.stream("half ")
        await turn.abandon()
    view = await stores.supervision.read(key, USER)
    assert view.row is not None and view.row.status == "running"
    record = await stores.recording.read(key, USER)
    assert record is not None and record.message == {"text": "half "}
    info = await conv.info()
    assert info is not None and info.last_turn_status == "running"

    clock.advance(CONFIG.dead_after + 1)
    assert liveness(await stores.supervision.read(key, USER), CONFIG.dead_after) == "dead"
    lease = await claim(stores, key, USER, "a1", lease_config=CONFIG, resume_live=False)
    assert lease.reason == "dead"
    async with Turn(stores, key, USER, "a1", lease=lease, text="half ") as resumed:
        await resumed.stream("half and whole")
    messages = await conv.messages()
    assert [(m.id, m.content) for m in messages] == [("u1", "q"), ("a1", "half and whole")]
    view = await stores.supervision.read(key, USER)
    assert view.row is not None and view.row.status == "done"


async def test_an_adopted_lease_must_match(stores: MemoryStores, key: ConversationKey):
    lease = await claim(stores, key, USER, "a1", lease_config=CONFIG)
    with pytest.raises(UsageError):
        Turn(stores, key, USER, "a2", lease=lease)
