"""The supervision row as the header stores it (one string, see ``header.row_value``):
every message id reads back whole, through the in-place CAS, the general path and the
guarded delete, and the fence stays at the row's epoch once the row is gone."""

from __future__ import annotations

import uuid

import pytest

from agentstores.errors import FencedError
from agentstores.keys import ConversationKey
from agentstores.models import RecordedEvent, SupervisionRow
from agentstores_mongo.stores import MongoStores
from tests.servers.mongo import Installation

P = "p"
AWKWARD = ["a|b", "|", "||lead", "trail|", "1|2|3|4", "running|9|ff|x", "ünï|cødé"]


async def test_every_message_id_reads_back_whole(installed: Installation) -> None:
    async with MongoStores(installed.url) as stores:
        sup = stores.supervision
        for message_id in AWKWARD:
            key = ConversationKey("row", uuid.uuid4().hex)
            # general path (no row yet), then in place: a heartbeat, a takeover, a finish
            assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "x", 1))
            assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", message_id, 1))
            assert (await sup.read(key, P)).row.message_id == message_id  # type: ignore[union-attr]
            assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", message_id, 2))
            assert await sup.compare_and_swap(key, P, 2, SupervisionRow("done", message_id, 2))
            view = await sup.read(key, P)
            assert view.row is not None
            assert (view.row.status, view.row.message_id, view.row.epoch) == (
                "done",
                message_id,
                2,
            )
            assert view.fence == 2
            # a delete naming a neighbouring id misses; the exact one removes the row
            assert not await sup.delete(key, P, message_id + "|", 2)
            assert await sup.delete(key, P, message_id, 2)
            view = await sup.read(key, P)
            assert view.row is None and view.fence == 2
            # the fence outlives the row: a swap below it loses, one at it wins
            assert not await sup.compare_and_swap(key, P, None, SupervisionRow("running", "y", 1))
            assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "y", 2))


async def test_a_takeover_in_place_fences_later_writes_below_it(
    installed: Installation,
) -> None:
    """The in-place takeover raises only the row's epoch; writes judged on the fence
    (state, recording) see it at once, and a delete keeps it after the row is gone."""
    async with MongoStores(installed.url) as stores:
        key = ConversationKey("row", uuid.uuid4().hex)
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        await stores.state.save(key, P, {"n": 1}, epoch=1)
        assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "b", 5))
        with pytest.raises(FencedError):
            await stores.state.save(key, P, {"n": 2}, epoch=4)
        with pytest.raises(FencedError):
            await stores.recording.put(key, P, RecordedEvent(0, {"i": 0}, "b", 4))
        assert await sup.delete(key, P, "b", 5)
        assert (await sup.read(key, P)).fence == 5
        with pytest.raises(FencedError):
            await stores.state.save(key, P, {"n": 3}, epoch=4)
        await stores.state.save(key, P, {"n": 4}, epoch=5)
        assert await stores.state.load(key, P) == {"n": 4}
