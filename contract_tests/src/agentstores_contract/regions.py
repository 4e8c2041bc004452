"""The regions real deployments reach and generators rarely do: principals that differ
only in ways normalization merges, epochs and indexes at representation limits, and
JSON values that only an exact round trip keeps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentstores.errors import NotOwnedError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import exact
from .promises import promise
from .scenarios import fenced, raises
from .strategies import CONFUSABLE_GROUPS, EPOCH_BOUNDARIES, EXACT_JSON

TURN = "turn"


def _nested(depth: int) -> Any:
    value: Any = [2**63, -0.0]
    for level in range(depth):
        value = {f"d{level}": value} if level % 2 else [value]
    return value


EXACT_DOCUMENTS: tuple[Any, ...] = (
    list(EXACT_JSON),
    {"é": 1, "e\u0301": 2, "É": 3, "": 4, " ": 5, "\u212a": 6, "K": 7},
    {"int": 1, "float": 1.0, "bool": True, "zero": 0, "negzero": -0.0, "null": None},
    [1, 1.0, True, 0, 0.0, -0.0, False, "1", [], {}, [[]], [{}], {"": {}}],
    _nested(40),
)
"""Whole documents: every exact scalar, keys that differ only by normalization, look-alike
values side by side, and deep nesting."""


class RegionContract(ContractBase):
    @promise("principals.confusables")
    def test_confusable_principals_stay_apart(self, backend: BackendUnderTest) -> None:
        """Each member of a confusable group is its own principal: the others can neither
        write nor see the owner's key, and sharing with one shares with that one only."""
        tenant = self.tenant()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            for number, group in enumerate(CONFUSABLE_GROUPS):
                for turn in range(2):
                    owner, reader = group[turn], group[1 - turn]
                    others = [p for p in group if p not in (owner, reader)]
                    key = ConversationKey(tenant, f"g{number}-{turn}")
                    await conv.append_messages(key, owner, [Message("m", "user", owner)])
                    await stores.state.save(key, owner, {"by": owner})
                    for intruder in (reader, *others):
                        where = f"{owner!r}'s key, by {intruder!r}"
                        await raises(
                            NotOwnedError,
                            stores.state.save(key, intruder, {"by": intruder}),
                            f"state.save on {where}",
                        )
                        await raises(
                            NotOwnedError,
                            conv.append_messages(key, intruder, [Message("x", "user", "x")]),
                            f"append on {where}",
                        )
                        assert await conv.get_conversation(key, intruder) is None, (
                            f"get_conversation of {where} must see nothing"
                        )
                        assert await stores.state.load(key, intruder) == {}, (
                            f"state.load of {where} must see nothing"
                        )
                    await conv.share(key, owner, reader)
                    info = await conv.get_conversation(key, reader)
                    assert info is not None and info.owner == owner, (
                        f"{owner!r} shared with {reader!r}, who must see it owned by {owner!r}"
                    )
                    assert info.shared_with == {reader}
                    for other in others:
                        assert await conv.get_conversation(key, other) is None, (
                            f"sharing {owner!r}'s key with {reader!r} let {other!r} see it"
                        )
                        assert await conv.read_messages(key, other) == []
                    listed = await conv.list_conversations(tenant, reader)
                    assert key not in {i.key for i in listed.items}, (
                        f"{reader!r} lists {owner!r}'s conversation as its own"
                    )

        self.run(backend, body)

    @promise("fencing.large_epochs")
    def test_epochs_and_indexes_at_representation_limits(self, backend: BackendUnderTest) -> None:
        """Just below and at ``2**31``, ``2**53`` and ``2**63 - 1`` an epoch or index one
        lower is still lower: every store refuses it and CAS tells them apart."""

        async def body(stores: Stores) -> None:
            for high in EPOCH_BOUNDARIES:
                low = high - 1
                key = self.key(f"e{high}")
                what = f"epoch {low} after {high}"
                assert await stores.supervision.compare_and_swap(
                    key, "p", None, SupervisionRow("running", TURN, high)
                ), f"supervision CAS creating a row at epoch {high}"
                view = await stores.supervision.read(key, "p")
                assert view.row is not None and exact(view.row.epoch) == exact(high), (
                    f"the row's epoch {high} came back as {view.row and view.row.epoch!r}"
                )
                assert exact(view.fence) == exact(high), f"fence {high} read as {view.fence!r}"
                assert not await stores.supervision.compare_and_swap(
                    key, "p", low, SupervisionRow("running", TURN, high)
                ), f"supervision CAS expecting {low} matched a row at {high}"
                await fenced(
                    stores.state.save(key, "p", {"e": low}, epoch=low), low, f"state, {what}"
                )
                await fenced(
                    stores.conversations.append_messages(
                        key, "p", [Message("m", "user", "x")], epoch=low
                    ),
                    low,
                    f"append, {what}",
                )
                await fenced(
                    stores.recording.put(key, "p", RecordedEvent(0, "x", TURN, low)),
                    low,
                    f"recording, {what}",
                )
                assert await stores.recording.put(key, "p", RecordedEvent(high, "new", TURN, high))
                assert not await stores.recording.put(
                    key, "p", RecordedEvent(low, "old", TURN, high)
                ), f"a recording flush at index {low} rolled back the one at {high}"
                event = await stores.recording.read(key, "p")
                assert event is not None and exact(event.index) == exact(high), (
                    f"the recording's index {high} came back as {event and event.index!r}"
                )
                await stores.state.save(key, "p", {"e": high}, epoch=high)
                assert exact(await stores.state.load(key, "p")) == exact({"e": high})
            beyond, key = 2**63, self.key("beyond")
            await raises(UsageError, stores.state.save(key, "p", {}, epoch=beyond), "epoch 2**63")
            await raises(
                UsageError,
                stores.conversations.append_messages(
                    key, "p", [Message("m", "user", 1)], epoch=beyond
                ),
                "append at epoch 2**63",
            )
            await raises(
                UsageError,
                stores.conversations.get_transcript(key, "p", index=-beyond),
                "index -2**63",
            )
            for make in (
                lambda: SupervisionRow("running", TURN, beyond),
                lambda: RecordedEvent(beyond, "x", TURN, 0),
            ):
                with pytest.raises(UsageError):
                    make()
            assert await stores.state.load(key, "p") == {}, "a refused epoch left state behind"

        self.run(backend, body)

    @promise("json.exact")
    def test_json_round_trips_exactly(self, backend: BackendUnderTest) -> None:
        """Message content and metadata, state, recording snapshots and token payloads
        come back with every number's type and bits, and every key, as written."""
        key = self.key()

        async def body(stores: Stores) -> None:
            messages = [
                Message(f"m{i}", "assistant", doc, metadata={"doc": doc, **_as_object(doc)})
                for i, doc in enumerate(EXACT_DOCUMENTS)
            ]
            await stores.conversations.append_messages(key, "p", messages)
            stored = await stores.conversations.read_messages(key, "p")
            for sent, got in zip(messages, stored, strict=True):
                assert exact(got.content) == exact(sent.content), (
                    f"content {sent.content!r} came back as {got.content!r}"
                )
                assert exact(dict(got.metadata)) == exact(dict(sent.metadata)), (
                    f"metadata {sent.metadata!r} came back as {dict(got.metadata)!r}"
                )
            rows = await stores.conversations.get_transcript(key, "p")
            assert exact([r.content for r in rows]) == exact(list(EXACT_DOCUMENTS))
            expires = await stores.now() + timedelta(hours=1)
            for i, doc in enumerate(EXACT_DOCUMENTS):
                await stores.state.save(key, "p", {"doc": doc})
                loaded = await stores.state.load(key, "p")
                assert exact(loaded) == exact({"doc": doc}), f"state {doc!r} came back {loaded!r}"
                assert await stores.recording.put(key, "p", RecordedEvent(i, doc, TURN, 0))
                event = await stores.recording.read(key, "p")
                assert event is not None and exact(event.message) == exact(doc), (
                    f"recording {doc!r} came back as {event and event.message!r}"
                )
                await stores.pause_tokens.put(f"t{i}", key, "p", doc, expires)
                payload = await stores.pause_tokens.claim(f"t{i}", key, "p")
                assert exact(payload) == exact(doc), f"token payload {doc!r} came back {payload!r}"

        self.run(backend, body)


def _as_object(doc: Any) -> dict[str, Any]:
    return doc if isinstance(doc, dict) else {}
