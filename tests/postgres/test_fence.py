"""The fence as this backend keeps it: greatest(keys.fence, supervision epoch), with a
copy on the supervision row so that a CAS reads and writes that row alone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from agentstores.errors import FencedError, NotOwnedError, StaleWriteError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores_postgres.stores import PostgresStores

from .conftest import PgServer

P = "owner"


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


async def test_a_fence_raised_by_another_store_stops_a_lower_cas(pg: PgServer) -> None:
    key = _key()
    async with PostgresStores(pg.url) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        await stores.state.save(key, P, {"x": 1}, epoch=3)
        assert (await sup.read(key, P)).fence == 3
        assert not await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "a", 1))
        assert not await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "a", 2))
        assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "b", 3))
        assert await sup.compare_and_swap(key, P, 3, SupervisionRow("running", "b", 3))


async def test_deleting_the_row_keeps_its_epoch_as_the_fence(pg: PgServer) -> None:
    key = _key()
    async with PostgresStores(pg.url) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 5))
        assert await sup.delete(key, P, "a", 5)
        view = await sup.read(key, P)
        assert view.row is None and view.fence == 5
        assert not await sup.compare_and_swap(key, P, None, SupervisionRow("running", "b", 4))
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "b", 6))
        # a takeover fences every store at once, without touching the header
        assert await sup.compare_and_swap(key, P, 6, SupervisionRow("running", "c", 7))
        with pytest.raises(FencedError) as info:
            await stores.state.save(key, P, {"late": True}, epoch=6)
        assert info.value.fence == 7


async def test_refusals_carry_what_the_write_carried_and_what_refused_it(pg: PgServer) -> None:
    """The server sends back the fence and the tail; the epoch and the expected tail come
    from the call: every refusal names both sides, and the key."""
    key = _key()
    async with PostgresStores(pg.url) as stores:
        conv = stores.conversations
        await conv.append_messages(key, P, [Message("m1", "user", "hi")], epoch=5)
        with pytest.raises(FencedError) as fenced:
            await stores.state.save(key, P, {"late": True}, epoch=4)
        assert (fenced.value.epoch, fenced.value.fence, fenced.value.key) == (4, 5, key)
        with pytest.raises(FencedError) as fenced:
            await conv.append_messages(key, P, [Message("m2", "user", "x")], epoch=2)
        assert (fenced.value.epoch, fenced.value.fence) == (2, 5)
        # the recording refuses an epoch below its own, with that epoch as the fence
        await stores.recording.put(key, P, RecordedEvent(0, "a", "r", 7))
        with pytest.raises(FencedError) as fenced:
            await stores.recording.put(key, P, RecordedEvent(1, "b", "r", 6))
        assert (fenced.value.epoch, fenced.value.fence) == (6, 7)
        with pytest.raises(StaleWriteError) as stale:
            await conv.append_messages(key, P, [Message("m3", "user", "x")], expected_tail="m0")
        assert (stale.value.tail, stale.value.expected, stale.value.key) == ("m1", "m0", key)
        with pytest.raises(NotOwnedError) as stranger:
            await stores.state.save(key, "stranger", {})
        assert stranger.value.key == key
        assert await stores.supervision.compare_and_swap(
            key, P, None, SupervisionRow("running", "a", 8)
        )
        with pytest.raises(NotOwnedError) as stranger:
            await stores.supervision.compare_and_swap(
                key, "stranger", 8, SupervisionRow("running", "b", 9)
            )
        assert stranger.value.key == key


async def _fenced_by_a_takeover_in_flight(
    pg: PgServer, key: ConversationKey, write: Callable[[], Awaitable[object]]
) -> None:
    """Start a takeover of ``key`` to epoch 2 shaped like the CAS (the supervision row
    alone, no header lock) and leave it uncommitted; start ``write`` (of epoch 1), check
    it waits, commit the takeover, and check the write is fenced by epoch 2."""
    takeover = await asyncpg.connect(pg.admin_url)
    late: asyncio.Future[object] | None = None
    try:
        tx = takeover.transaction()
        await tx.start()
        await takeover.execute(
            f'UPDATE "{pg.installation.schema}".supervision SET epoch = 2, message_id = $3'
            " WHERE tenant = $1 AND session_id = $2",
            key.tenant,
            key.session_id,
            "b",
        )
        late = asyncio.ensure_future(write())
        await asyncio.sleep(0.5)
        assert not late.done(), "the write did not wait for the takeover in flight"
        await tx.commit()
        with pytest.raises(FencedError) as info:
            await late
        assert info.value.fence == 2
    finally:
        if late is not None and not late.done():
            late.cancel()
        await takeover.close()


@pytest.mark.parametrize(
    "batch",
    [
        [Message("x2", "tool", "late")],  # one row on the expected tail: the one-statement path
        [Message("q2", "user", "late")],  # a speaker's message: the judged path
    ],
    ids=["one-statement", "judged"],
)
async def test_an_append_waits_for_a_takeover_in_flight_and_is_fenced_by_it(
    pg: PgServer, batch: list[Message]
) -> None:
    """The takeover CAS updates the supervision row alone (no header lock). An append
    judged against the epoch while that CAS is uncommitted waits for it and is fenced by
    the new epoch (conv_append locks the supervision row); reading the epoch unlocked,
    it landed under the takeover."""
    key = _key()
    async with PostgresStores(pg.url) as stores:
        conv = stores.conversations
        assert await stores.supervision.compare_and_swap(
            key, P, None, SupervisionRow("running", "a", 1)
        )
        await conv.append_messages(key, P, [Message("x1", "tool", "t")], epoch=1)
        await _fenced_by_a_takeover_in_flight(
            pg,
            key,
            lambda: conv.append_messages(key, P, batch, expected_tail="x1", epoch=1),
        )
        rows = await conv.read_messages(key, P, start=0, limit=10)
        assert [m.id for m in rows] == ["x1"]


async def test_a_state_save_waits_for_a_takeover_in_flight_and_is_fenced_by_it(
    pg: PgServer,
) -> None:
    """Every write other than the append locks the header through ``lock_header``; a
    fenced one judged while a takeover CAS is uncommitted waits for it and is fenced by
    the new epoch (lock_header locks the supervision row). Reading the epoch unlocked,
    it landed under the takeover: the takeover had returned, and a write of the old
    epoch still landed."""
    key = _key()
    async with PostgresStores(pg.url) as stores:
        assert await stores.supervision.compare_and_swap(
            key, P, None, SupervisionRow("running", "a", 1)
        )
        await stores.state.save(key, P, {"v": 1}, epoch=1)
        await _fenced_by_a_takeover_in_flight(
            pg, key, lambda: stores.state.save(key, P, {"v": 2}, epoch=1)
        )
        assert (await stores.state.load(key, P)) == {"v": 1}
