"""Conversation-level metadata: the map ``set_metadata`` and ``append_messages(metadata=)``
shallow-merge into, and what every other call does to it."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Mapping
from typing import Any

from agentstores.errors import (
    ErasedError,
    FencedError,
    NotFoundError,
    NotOwnedError,
    StaleWriteError,
    UsageError,
)
from agentstores.keys import ConversationKey
from agentstores.models import JSON, ConversationInfo, Message
from agentstores.stores import MAX_CONVERSATION_METADATA_BYTES, Stores
from agentstores.stores.ambient import fenced_as

from .backend import BackendUnderTest
from .base import ContractBase
from .metadata import _after
from .promises import promise
from .scenarios import check_fenced, raises

OWNER, READER, STRANGER = "owner", "reader", "stranger"
AGENT: dict[str, JSON] = {
    "agent_identifier": "research-agent",
    "bot_params": {"temperature": 0.25, "tools": ["search", "python"], "depth": 3},
    "conversation_context": {"document_ids": ["d1", "d2"], "note": None},
}
EXACT: dict[str, JSON] = {
    "int": 12345678901234567890,
    "negative": -(2**63),
    "float": 0.1,
    "whole float": 1.0,
    "tiny": 5e-324,
    "big": 1.7976931348623157e308,
    "neg zero": -0.0,
    "bools": [True, False, None],
    "text": 'naïve ☃ \U0001f600 \x00 \u2028 "quoted" \\',
    "empty": {"": [], "{}": {}},
    "ключ ☃": "unicode name",
    "nested": {"b": 1, "a": [1, "1", 1.0, {"z": None}]},
}


async def _info(stores: Stores, key: ConversationKey, who: str = OWNER) -> ConversationInfo:
    info = await stores.conversations.get_conversation(key, who)
    assert info is not None, f"{key} must be visible to {who!r}"
    return info


async def _metadata(stores: Stores, key: ConversationKey, who: str = OWNER) -> dict[str, JSON]:
    return dict((await _info(stores, key, who)).metadata)


def _same(got: Mapping[str, JSON], want: Mapping[str, JSON], what: str) -> None:
    """Equal, and every number of the same type and bits (``1 == 1.0 == True`` in Python)."""
    assert _typed(got) == _typed(want), f"{what}: metadata {dict(got)!r}, expected {dict(want)!r}"


def _typed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, float):
        return ("float", value.hex(), math.copysign(1.0, value))
    return (type(value).__name__, value)


async def _unchanged(
    stores: Stores, key: ConversationKey, call: Awaitable[Any], error: type[Exception], what: str
) -> None:
    """``call`` raises ``error`` and leaves the conversation's info exactly as it was."""
    before = await _info(stores, key)
    await raises(error, call, what)
    after = await _info(stores, key)
    assert after == before, f"{what} changed the conversation: {before} -> {after}"


class ConversationMetadataContract(ContractBase):
    @promise("conversations.metadata.default")
    def test_starts_empty_and_every_read_returns_it(self, backend: BackendUnderTest) -> None:
        """No metadata until written; then get_conversation, list_conversations and the
        handle's info all return the same map."""
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversation(key, OWNER)
            await conv.append(Message.user("q", id="q"))
            info = await conv.info()
            assert info is not None and dict(info.metadata) == {}, f"fresh metadata: {info}"
            listed = (await stores.conversations.list_conversations(key.tenant, OWNER)).items
            assert [dict(i.metadata) for i in listed] == [{}], f"listed: {listed}"
            await conv.set_metadata(AGENT)
            got = await conv.info()
            assert got is not None
            _same(got.metadata, AGENT, "the handle's info after set_metadata")
            _same(await _metadata(stores, key), AGENT, "get_conversation")
            listed = (await stores.conversations.list_conversations(key.tenant, OWNER)).items
            assert len(listed) == 1, f"listed: {listed}"
            _same(listed[0].metadata, AGENT, "list_conversations")
            assert listed[0] == got, f"listing {listed[0]} differs from get {got}"

        self.run(backend, body)

    @promise("conversations.metadata.merge")
    def test_set_metadata_merges_shallowly(self, backend: BackendUnderTest) -> None:
        """Named keys are replaced whole (a nested map is not merged), None removes a key
        (removing an absent one is no error), other keys stay; each call moves updated_at;
        an empty update is an accepted write that changes nothing else."""
        key = self.key()

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await c.append_messages(key, OWNER, [Message("q", "user", "x")])
            await c.set_metadata(key, OWNER, AGENT)
            want = dict(AGENT)
            steps: list[dict[str, JSON]] = [
                {"bot_params": {"temperature": 1}},
                {"conversation_context": None, "user_roles": ["admin"], "absent": None},
                {"user_tenants": ["t1", "t2"], "user_agent_id": "ua-7"},
                {},
                {"agent_identifier": None, "user_roles": None},
            ]
            last = await _info(stores, key)
            for update in steps:
                before = await _after(stores, last.updated_at)
                await c.set_metadata(key, OWNER, update)
                for name, value in update.items():
                    if value is None:
                        want.pop(name, None)
                    else:
                        want[name] = value
                now = await _info(stores, key)
                _same(now.metadata, want, f"after set_metadata({update!r})")
                assert now.updated_at >= before, f"set_metadata({update!r}) left updated_at"
                assert (now.title, now.message_count, now.created_at) == (
                    last.title,
                    last.message_count,
                    last.created_at,
                ), f"set_metadata({update!r}) changed more than the metadata: {now}"
                last = now
            assert set(want) == {"bot_params", "user_tenants", "user_agent_id"}

        self.run(backend, body)

    @promise("conversations.metadata.append")
    def test_append_merges_in_the_same_commit(self, backend: BackendUnderTest) -> None:
        """The creating append sets the initial metadata; later appends merge theirs (an
        empty batch too); a refused append (stale tail, fenced, not owned, create=False
        on a missing key) and an idempotent re-append change none of it."""
        key = self.key()
        missing = self.key("missing")

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await c.append_messages(
                key, OWNER, [Message("u0", "user", "q")], metadata=AGENT, epoch=5
            )
            _same(await _metadata(stores, key), AGENT, "the creating append")
            await c.append_messages(
                key, OWNER, [Message("a0", "assistant", "r")], metadata={"user_roles": ["r"]}
            )
            want = {**AGENT, "user_roles": ["r"]}
            _same(await _metadata(stores, key), want, "a second append")
            await c.append_messages(key, OWNER, [], metadata={"conversation_context": None})
            want.pop("conversation_context")
            _same(await _metadata(stores, key), want, "an empty batch")
            late = [Message("late", "user", "x")]
            await _unchanged(
                stores,
                key,
                c.append_messages(key, OWNER, late, expected_tail="u0", metadata={"x": 1}),
                StaleWriteError,
                "an append on a stale tail",
            )
            before = await _info(stores, key)
            try:
                await c.append_messages(key, OWNER, late, epoch=4, metadata={"x": 1})
            except FencedError as exc:
                check_fenced(exc, 4, "a fenced append with metadata")
            else:
                raise AssertionError("an append at epoch 4 below the fence 5 was accepted")
            assert await _info(stores, key) == before, "a fenced append changed the metadata"
            await _unchanged(
                stores,
                key,
                c.append_messages(key, STRANGER, late, metadata={"x": 1}),
                NotOwnedError,
                "an append by a stranger",
            )
            await c.append_messages(key, OWNER, [Message("u0", "user", "q")], metadata={"x": 1})
            _same(await _metadata(stores, key), want, "an idempotent re-append")
            await raises(
                NotFoundError,
                c.append_messages(missing, OWNER, late, create_if_absent=False, metadata={"x": 1}),
                "create_if_absent=False on a missing key",
            )
            assert await c.get_conversation(missing, OWNER) is None
            ids = [m.id for m in await c.read_messages(key, OWNER)]
            assert ids == ["u0", "a0"], f"transcript {ids}"

        self.run(backend, body)

    @promise("conversations.metadata.exact")
    def test_values_round_trip_exactly(self, backend: BackendUnderTest) -> None:
        """Big and negative integers, float bits (-0.0, 1.0 stays a float), NUL and
        line separators in text, unicode names, nested maps: each read gives them back."""
        key = self.key()

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await c.append_messages(key, OWNER, [Message("q", "user", "x")], metadata=EXACT)
            _same(await _metadata(stores, key), EXACT, "after an append")
            await c.set_metadata(key, OWNER, {"float": 2.5, "added": 7})
            _same(
                await _metadata(stores, key),
                {**EXACT, "float": 2.5, "added": 7},
                "after set_metadata",
            )

        self.run(backend, body)

    @promise("conversations.metadata.limits")
    def test_bad_metadata_is_refused_and_changes_nothing(self, backend: BackendUnderTest) -> None:
        """Not a mapping, a non-str / empty / NUL-bearing name, a value JSON cannot hold,
        an update over the limit, or a merge that would end over it: UsageError, nothing
        changed. A map of exactly the limit (names' UTF-8 plus values' canonical JSON)
        is accepted, and one byte more is not."""
        key = self.key()

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await c.append_messages(key, OWNER, [Message("q", "user", "x")], metadata={"a": 1})
            limit = MAX_CONVERSATION_METADATA_BYTES
            bad: dict[str, Any] = {
                "a list": [("a", 1)],
                "an int name": {1: "x"},
                "an empty name": {"": 1},
                "a NUL in a name": {"a\x00b": 1},
                "a very long name": {"n" * 10_000: 1},
                "NaN": {"x": math.nan},
                "an object": {"x": object()},
                "a set": {"x": {1, 2}},
                "over the limit": {"big": "x" * limit},
            }
            for what, updates in bad.items():
                await _unchanged(
                    stores, key, c.set_metadata(key, OWNER, updates), UsageError, f"set {what}"
                )
                await _unchanged(
                    stores,
                    key,
                    c.append_messages(key, OWNER, [Message("n", "user", "x")], metadata=updates),
                    UsageError,
                    f"append with {what}",
                )
            # {"a": 1} costs 1 + 1 bytes; "b" + '"...."' costs 1 + 2 + len(text).
            room = limit - 2 - 1 - 2
            await _unchanged(
                stores,
                key,
                c.set_metadata(key, OWNER, {"b": "y" * (room + 1)}),
                UsageError,
                "a merge one byte over the limit",
            )
            await _unchanged(
                stores,
                key,
                c.append_messages(
                    key, OWNER, [Message("n", "user", "x")], metadata={"b": "y" * (room + 1)}
                ),
                UsageError,
                "an append whose merge is one byte over the limit",
            )
            await c.set_metadata(key, OWNER, {"b": "y" * room})
            _same(await _metadata(stores, key), {"a": 1, "b": "y" * room}, "exactly the limit")
            await _unchanged(
                stores,
                key,
                c.set_metadata(key, OWNER, {"c": 0}),
                UsageError,
                "one more name at the limit",
            )
            await c.set_metadata(key, OWNER, {"b": None, "c": 0})
            _same(await _metadata(stores, key), {"a": 1, "c": 0}, "after making room")
            # exactly the limit again, reached only because the write clears a name
            await c.set_metadata(key, OWNER, {"c": None, "bb": "y" * (room - 1)})
            _same(
                await _metadata(stores, key),
                {"a": 1, "bb": "y" * (room - 1)},
                "exactly the limit, with a name cleared in the same write",
            )
            ids = [m.id for m in await c.read_messages(key, OWNER)]
            assert ids == ["q"], f"a refused append with metadata left {ids}"

        self.run(backend, body)

    @promise("conversations.metadata.visibility")
    def test_owner_writes_readers_see_others_do_not(self, backend: BackendUnderTest) -> None:
        """The reader a conversation is shared with sees its metadata but may not write
        it; a stranger sees nothing (absent, unlisted) and may not write; set_metadata on
        a missing key is NotFoundError and creates nothing."""
        key = self.key()
        missing = self.key("missing")

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await c.append_messages(key, OWNER, [Message("q", "user", "x")], metadata=AGENT)
            await c.share(key, OWNER, READER)
            _same(await _metadata(stores, key, READER), AGENT, "the reader's view")
            assert await c.get_conversation(key, STRANGER) is None, "a stranger sees it"
            for who in (READER, STRANGER):
                listed = (await c.list_conversations(key.tenant, who)).items
                assert listed == [], f"{who!r} lists {listed}"
                await _unchanged(
                    stores,
                    key,
                    c.set_metadata(key, who, {"agent_identifier": who}),
                    NotOwnedError,
                    f"set_metadata by {who!r}",
                )
            await c.unshare(key, OWNER, READER)
            assert await c.get_conversation(key, READER) is None, "unshared, the reader sees it"
            await raises(
                NotFoundError, c.set_metadata(missing, OWNER, {"x": 1}), "set_metadata on nothing"
            )
            assert await c.get_conversation(missing, OWNER) is None
            assert (await stores.supervision.read(missing, OWNER)).fence == 0

        self.run(backend, body)

    @promise("conversations.metadata.lifecycle")
    def test_branch_copies_truncate_keeps_erasure_removes(self, backend: BackendUnderTest) -> None:
        """A branch (by the owner or a reader) starts with the source's metadata, and
        after it each side's writes stay its own; truncate leaves the metadata; after
        delete nobody sees it and set_metadata is ErasedError."""
        key = self.key()

        async def body(stores: Stores) -> None:
            c = stores.conversations
            script = [Message("u0", "user", "q"), Message("a0", "assistant", "r")]
            await c.append_messages(key, OWNER, script, metadata=AGENT)
            await c.share(key, OWNER, READER)
            for who in (OWNER, READER):
                new = await c.branch(key, who, "u0")
                _same(await _metadata(stores, new, who), AGENT, f"a branch by {who!r}")
                await c.set_metadata(new, who, {"agent_identifier": who, "bot_params": None})
                _same(await _metadata(stores, key), AGENT, f"the source after {who!r}'s branch")
            await c.set_metadata(key, OWNER, {"user_roles": ["x"]})
            _same(
                await _metadata(stores, new, READER),
                {"agent_identifier": READER, "conversation_context": AGENT["conversation_context"]},
                "a branch after its source changed",
            )
            want = {**AGENT, "user_roles": ["x"]}
            assert await c.truncate(key, OWNER, "u0") == 2
            _same(await _metadata(stores, key), want, "after truncate")
            assert await c.delete(key, OWNER)
            for who in (OWNER, READER):
                assert await c.get_conversation(key, who) is None, f"{who!r} sees erased data"
            await raises(
                ErasedError, c.set_metadata(key, OWNER, {"late": True}), "set_metadata erased"
            )

        self.run(backend, body)

    @promise("conversations.metadata.durable")
    def test_metadata_survives_reopening(self, backend: BackendUnderTest) -> None:
        """Written through one bundle, closed, read through a new one."""
        key = self.key()

        async def write(stores: Stores) -> None:
            await stores.conversations.append_messages(
                key, OWNER, [Message("q", "user", "x")], metadata=EXACT
            )
            await stores.conversations.set_metadata(key, OWNER, AGENT)

        async def read(stores: Stores) -> None:
            _same(await _metadata(stores, key), {**EXACT, **AGENT}, "after reopening")

        self.run(backend, write)
        self.run(backend, read)

    @promise("conversations.metadata.ambient")
    def test_ambient_epoch_fences_metadata_writes(self, backend: BackendUnderTest) -> None:
        """Inside a lease's context a plain set_metadata or append(metadata=) carries its
        epoch: at the fence it lands and raises nothing; once a newer epoch has written,
        both are FencedError and change nothing."""
        key = self.key()

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await c.append_messages(key, OWNER, [Message("q", "user", "x")], epoch=3)
            with fenced_as(key, 3):
                await c.set_metadata(key, OWNER, {"by": "turn 3"})
            await stores.state.save(key, OWNER, {"turn": 4}, epoch=4)
            with fenced_as(key, 3):
                for what, call in {
                    "set_metadata": c.set_metadata(key, OWNER, {"by": "zombie"}),
                    "append(metadata=)": stores.conversation(key, OWNER).append(
                        Message.user("z", id="z"), metadata={"by": "zombie"}
                    ),
                }.items():
                    before = await _info(stores, key)
                    try:
                        await call
                    except FencedError as exc:
                        check_fenced(exc, 3, f"a zombie's plain {what}")
                    else:
                        raise AssertionError(f"a plain {what} at ambient epoch 3 after 4 landed")
                    assert await _info(stores, key) == before, f"a fenced {what} changed it"
            _same(await _metadata(stores, key), {"by": "turn 3"}, "after the zombie's writes")

        self.run(backend, body)
