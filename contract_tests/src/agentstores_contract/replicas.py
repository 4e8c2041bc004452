"""Two replicas: a write through one bundle is what another bundle of the store reads.

Each step reads through the second bundle first (so a bundle that caches what it read
has something to keep), writes through the first, then reads through the second again;
and back the other way. A backend whose bundles keep a private cache, a private index
or a private clock of what they wrote fails here, where one bundle alone would pass.
"""

from __future__ import annotations

from datetime import timedelta

from agentstores.errors import (
    AlreadyClaimedError,
    ErasedError,
    StaleWriteError,
)
from agentstores.keys import ConversationKey
from agentstores.models import (
    ClientInfo,
    Message,
    PendingAuthorization,
    RecordedEvent,
    SupervisionRow,
    UserIntegration,
)
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .scenarios import raises

OWNER, READER = "p", "q"


async def _supervision(a: Stores, b: Stores, key: ConversationKey) -> None:
    assert (await b.supervision.read(key, OWNER)).row is None
    assert await a.supervision.compare_and_swap(
        key, OWNER, None, SupervisionRow("running", "m1", 1)
    )
    view = await b.supervision.read(key, OWNER)
    assert view.row and (view.row.message_id, view.row.epoch) == ("m1", 1), (
        f"a claim through one bundle reads {view.row} through another"
    )
    assert not await b.supervision.compare_and_swap(
        key, OWNER, None, SupervisionRow("running", "m9", 1)
    ), "a second bundle created a row another bundle had already created"
    assert await b.supervision.compare_and_swap(key, OWNER, 1, SupervisionRow("running", "m2", 2))
    assert not await a.supervision.compare_and_swap(
        key, OWNER, 1, SupervisionRow("running", "m3", 2)
    ), "a bundle swapped on an epoch another bundle had already replaced"
    view = await a.supervision.read(key, OWNER)
    assert view.row and (view.row.message_id, view.row.epoch) == ("m2", 2) and view.fence == 2
    assert await a.supervision.delete(key, OWNER, "m2", 2)
    assert (await b.supervision.read(key, OWNER)).row is None, "a deleted row reads back"


async def _recording(a: Stores, b: Stores, key: ConversationKey) -> None:
    assert await b.recording.read(key, OWNER) is None
    assert await a.recording.put(key, OWNER, RecordedEvent(3, "three", "m1", 1))
    seen = await b.recording.read(key, OWNER)
    assert seen and seen.index == 3, f"a snapshot put through one bundle reads {seen}"
    assert not await b.recording.put(key, OWNER, RecordedEvent(2, "two", "m1", 1)), (
        "a second bundle rolled the snapshot back past what another bundle wrote"
    )
    assert await b.recording.put(key, OWNER, RecordedEvent(5, "five", "m1", 1))
    seen = await a.recording.read(key, OWNER)
    assert seen and (seen.index, seen.message) == (5, "five")
    assert await a.recording.delete(key, OWNER, "m1")
    assert await b.recording.read(key, OWNER) is None, "a deleted snapshot reads back"


async def _state(a: Stores, b: Stores, key: ConversationKey) -> None:
    assert await b.state.load(key, OWNER) == {}
    await a.state.save(key, OWNER, {"a": 1, "kept": [1]})
    assert await b.state.load(key, OWNER) == {"a": 1, "kept": [1]}
    await b.state.save(key, OWNER, {"b": 2})
    assert await a.state.load(key, OWNER) == {"b": 2}, "a key another bundle dropped is back"
    await a.state.delete(key, OWNER)
    assert await b.state.load(key, OWNER) == {}, "deleted state reads back"


async def _conversation(a: Stores, b: Stores, key: ConversationKey) -> None:
    tenant = key.tenant
    assert await b.conversations.get_conversation(key, OWNER) is None
    assert (await b.conversations.list_conversations(tenant, OWNER)).items == []
    await a.conversations.append_messages(key, OWNER, [Message("m1", "user", "one")])
    assert [m.id for m in await b.conversations.read_messages(key, OWNER)] == ["m1"]
    info = await b.conversations.get_conversation(key, OWNER)
    assert info and (info.message_count, info.tail_message_id) == (1, "m1"), info
    listed = (await b.conversations.list_conversations(tenant, OWNER)).items
    assert [i.key for i in listed] == [key], f"another bundle's conversation lists as {listed}"
    await b.conversations.append_messages(
        key, OWNER, [Message("m2", "user", "two")], expected_tail="m1"
    )
    await raises(
        StaleWriteError,
        a.conversations.append_messages(
            key, OWNER, [Message("m3", "user", "three")], expected_tail="m1"
        ),
        "a conditional append on a tail another bundle moved",
    )
    assert (
        await a.conversations.append_messages(key, OWNER, [Message("m2", "user", "two")]) == []
    ), "a message id another bundle appended was appended again"
    await a.conversations.set_title(key, OWNER, "title")
    await a.conversations.set_metadata(key, OWNER, {"k": 1})
    await a.conversations.set_last_turn_status(key, OWNER, "complete")
    info = await b.conversations.get_conversation(key, OWNER)
    assert info and (info.title, dict(info.metadata), info.last_turn_status) == (
        "title",
        {"k": 1},
        "complete",
    ), f"another bundle's title, metadata and status read {info}"
    await b.conversations.set_title(key, OWNER, None)
    await b.conversations.set_metadata(key, OWNER, {"k": None})
    info = await a.conversations.get_conversation(key, OWNER)
    assert info and (info.title, dict(info.metadata)) == (None, {}), (
        f"what another bundle cleared reads {info}"
    )
    assert await b.conversations.get_conversation(key, READER) is None, "before sharing"
    await a.conversations.share(key, OWNER, READER)
    assert len(await b.conversations.read_messages(key, READER)) == 2, "a share is not seen"
    await a.conversations.unshare(key, OWNER, READER)
    assert await b.conversations.read_messages(key, READER) == [], "an unshare is not seen"
    assert await b.conversations.truncate(key, OWNER, "m2") == 1
    assert [m.id for m in await a.conversations.read_messages(key, OWNER)] == ["m1"], (
        "a truncation through another bundle left the removed message readable"
    )
    fork = await a.conversations.branch(key, OWNER, "m1")
    assert [m.content for m in await b.conversations.read_messages(fork, OWNER)] == ["one"]
    assert await a.conversations.delete(key, OWNER)
    assert await b.conversations.get_conversation(key, OWNER) is None
    await raises(
        ErasedError,
        b.conversations.append_messages(key, OWNER, [Message("m4", "user", "four")]),
        "an append through another bundle after erasure",
    )
    await raises(ErasedError, b.state.save(key, OWNER, {"x": 1}), "state after erasure")


async def _pause_tokens(a: Stores, b: Stores, key: ConversationKey) -> None:
    later = await a.now() + timedelta(hours=1)
    await a.pause_tokens.put("t1", key, OWNER, {"n": 1}, later)
    assert await b.pause_tokens.claim("t1", key, OWNER) == {"n": 1}
    await raises(AlreadyClaimedError, a.pause_tokens.claim("t1", key, OWNER), "claimed elsewhere")
    await a.pause_tokens.put("t2", key, OWNER, {"n": 2}, later)
    await b.pause_tokens.abandon("t2", key, OWNER)
    await raises(AlreadyClaimedError, a.pause_tokens.claim("t2", key, OWNER), "abandoned elsewhere")


async def _oauth(a: Stores, b: Stores, tenant: str) -> None:
    expires = await a.now() + timedelta(minutes=10)
    pending = PendingAuthorization(
        f"state-{tenant}",
        "https://auth/x",
        "verifier",
        "https://auth/token",
        "https://app/cb",
        expires,
    )
    assert await b.oauth.get_user_integration(tenant, "u", "srv") is None
    await a.oauth.save_user_integration(UserIntegration(tenant, "u", "srv", pending=pending))
    found = await b.oauth.find_by_pending_state(pending.state)
    assert found and found.user == "u", "a pending authorization saved elsewhere is not found"
    await b.oauth.save_user_integration(UserIntegration(tenant, "u", "srv", tokens={"t": "x"}))
    assert await a.oauth.find_by_pending_state(pending.state) is None, (
        "a pending state another bundle cleared is still found"
    )
    got = await a.oauth.get_user_integration(tenant, "u", "srv")
    assert got and got.pending is None and dict(got.tokens or {}) == {"t": "x"}, got
    assert [r.server_name for r in await a.oauth.list_user_integrations(tenant, "u")] == ["srv"]
    await a.oauth.save_user_integration(UserIntegration(tenant, "u", "srv"))
    got = await b.oauth.get_user_integration(tenant, "u", "srv")
    assert got and got.pending is None and got.tokens is None, f"cleared tokens read {got}"
    assert await a.oauth.delete_user_integration(tenant, "u", "srv")
    assert await b.oauth.get_user_integration(tenant, "u", "srv") is None
    assert await b.oauth.list_user_integrations(tenant, "u") == []
    await a.oauth.save_client_info(ClientInfo(tenant, "srv", {"id": 1}))
    seen = await b.oauth.get_client_info(tenant, "srv")
    assert seen and dict(seen.client_info) == {"id": 1}
    await b.oauth.save_client_info(ClientInfo(tenant, "srv", {"id": 2}))
    assert [dict(c.client_info) for c in await a.oauth.list_client_info(tenant)] == [{"id": 2}]


class ReplicaContract(ContractBase):
    @promise("replicas.visibility")
    def test_writes_through_one_bundle_are_read_through_another(
        self, backend: BackendUnderTest
    ) -> None:
        async def body(a: Stores) -> None:
            async with backend.open() as b:
                tenant = self.tenant("vis")
                await _supervision(a, b, ConversationKey(tenant, "sv"))
                await _recording(a, b, ConversationKey(tenant, "rec"))
                await _state(a, b, ConversationKey(tenant, "st"))
                await _conversation(a, b, ConversationKey(tenant, "conv"))
                await _pause_tokens(a, b, ConversationKey(tenant, "pt"))
                await _oauth(a, b, tenant)

        self.run(backend, body)
