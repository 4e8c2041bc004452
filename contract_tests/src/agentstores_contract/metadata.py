"""Side effects on a conversation's metadata: which calls move ``updated_at`` (and so the
listing order) and which leave it alone, and what a branch starts with."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from agentstores.errors import NotFoundError, NotOwnedError
from agentstores.keys import ConversationKey
from agentstores.models import ConversationInfo, Message
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .scenarios import fenced, raises, stale

OWNER, READER, STRANGER = "owner", "reader", "stranger"
CLOCK_PATIENCE = 30.0
"""Seconds a store clock may take to move past a stamp before the suite calls it stuck."""
EPOCH = 5
SCRIPT = [
    Message("u0", "user", "q0"),
    Message("a0", "assistant", "r0"),
    Message("u1", "user", "q1"),
    Message("a1", "assistant", "r1"),
]


async def _info(stores: Stores, key: ConversationKey) -> ConversationInfo:
    info = await stores.conversations.get_conversation(key, OWNER)
    assert info is not None, f"{key} must exist"
    return info


async def _after(stores: Stores, stamp: datetime) -> datetime:
    """Wait (briefly) until the store clock is past ``stamp``, so a write that wrongly
    moves ``updated_at`` is seen to move it; returns the store's time then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CLOCK_PATIENCE
    now = await stores.now()
    while now <= stamp:
        assert loop.time() < deadline, f"the store clock stayed at or before {stamp}"
        await asyncio.sleep(0.001)
        now = await stores.now()
    return now


class MetadataContract(ContractBase):
    @promise("conversations.updated_at")
    def test_updated_at_moves_on_writes_only(self, backend: BackendUnderTest) -> None:
        """Every accepted write (append, status, title, truncate) moves ``updated_at`` to
        its own time; reads, shares, refused writes and the idempotent re-append leave it
        exactly as it was. ``created_at`` never moves."""
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            before = await stores.now()
            await conv.append_messages(key, OWNER, SCRIPT, epoch=EPOCH)
            first = await _info(stores, key)
            assert first.created_at >= before and first.updated_at >= first.created_at

            unchanged = {
                "get_transcript by the owner": conv.get_transcript(key, OWNER),
                "recent by a stranger": conv.recent(key, STRANGER, 2),
                "share": conv.share(key, OWNER, READER),
                "history by the reader": conv.history(key, READER),
                "the idempotent re-append": conv.append_messages(
                    key, OWNER, SCRIPT[:2], title="ignored", last_turn_status="errored"
                ),
                "set_title by the reader": raises(
                    NotOwnedError, conv.set_title(key, READER, "mine"), "set_title by the reader"
                ),
                "set_last_turn_status by a stranger": raises(
                    NotOwnedError,
                    conv.set_last_turn_status(key, STRANGER, "errored"),
                    "set_last_turn_status by a stranger",
                ),
                "a fenced set_last_turn_status": fenced(
                    conv.set_last_turn_status(key, OWNER, "errored", epoch=EPOCH - 1),
                    EPOCH - 1,
                    "a fenced set_last_turn_status",
                ),
                "a fenced set_title": fenced(
                    conv.set_title(key, OWNER, "late", epoch=EPOCH - 1),
                    EPOCH - 1,
                    "a fenced set_title",
                ),
                "a fenced append": fenced(
                    conv.append_messages(key, OWNER, [Message("late", "user", "x")], epoch=0),
                    0,
                    "a fenced append",
                ),
                "a conditional append on a stale tail": stale(
                    conv.append_messages(
                        key, OWNER, [Message("s", "user", "x")], expected_tail="u0"
                    ),
                    tail=SCRIPT[-1].id,
                    expected="u0",
                    what="a conditional append on a stale tail",
                ),
                "truncate at an unknown id": raises(
                    NotFoundError, conv.truncate(key, OWNER, "nope"), "truncate at an unknown id"
                ),
                "branch by the reader": conv.branch(key, READER, "a0"),
                "unshare": conv.unshare(key, OWNER, READER),
                "state.save": stores.state.save(key, OWNER, {"x": 1}, epoch=EPOCH),
            }
            last = first
            for what, call in unchanged.items():
                await _after(stores, last.updated_at)
                await call
                now = await _info(stores, key)
                assert (now.created_at, now.updated_at) == (first.created_at, last.updated_at), (
                    f"{what} moved updated_at from {last.updated_at} to {now.updated_at} "
                    f"(created_at {first.created_at} -> {now.created_at})"
                )
                assert (now.title, now.last_turn_status, now.message_count) == (None, None, 4), (
                    f"{what} changed the metadata: {now}"
                )
                last = now

            moving = {
                "set_last_turn_status": conv.set_last_turn_status(key, OWNER, "complete"),
                "set_title": conv.set_title(key, OWNER, "named"),
                "truncate": conv.truncate(key, OWNER, "a1"),
                "a fenced set_title at the fence": conv.set_title(key, OWNER, "again", epoch=EPOCH),
                "append": conv.append_messages(key, OWNER, [Message("u2", "user", "q")]),
            }
            for what, call in moving.items():
                before = await _after(stores, last.updated_at)
                await call
                now = await _info(stores, key)
                assert now.updated_at >= before, (
                    f"{what} must move updated_at to its own time (>= {before}); "
                    f"it stayed at {now.updated_at}"
                )
                assert now.created_at == first.created_at, f"{what} moved created_at"
                last = now
            assert (last.title, last.last_turn_status, last.message_count) == (
                "again",
                "complete",
                5,
            )

        self.run(backend, body)

    @promise("conversations.updated_at")
    def test_listing_follows_updated_at(self, backend: BackendUnderTest) -> None:
        """The listing puts the conversation written last first; a share does not reorder."""
        tenant = self.tenant()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            keys = [ConversationKey(tenant, f"s{i}") for i in range(3)]
            for key in keys:
                await conv.append_messages(key, OWNER, [Message("m", "user", key.session_id)])
            order = [i.key for i in (await conv.list_conversations(tenant, OWNER)).items]
            assert order == keys[::-1], f"listing order {order}, expected newest first"
            for key in keys:
                await _after(stores, (await _info(stores, key)).updated_at)
            await conv.set_title(keys[0], OWNER, "bumped")
            await _after(stores, (await _info(stores, keys[0])).updated_at)
            await conv.share(keys[1], OWNER, READER)
            order = [i.key for i in (await conv.list_conversations(tenant, OWNER)).items]
            assert order == [keys[0], keys[2], keys[1]], (
                f"after set_title on {keys[0]} and a share of {keys[1]}: listing order {order}"
            )

        self.run(backend, body)

    @promise("conversations.branch.metadata")
    def test_branch_starts_fresh(self, backend: BackendUnderTest) -> None:
        """A branch has its own fresh stamps, the source's title, the caller as owner, no
        shares, status or expiry; the source's metadata does not move."""
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            expires = await stores.now() + timedelta(days=1)
            await conv.append_messages(
                key, OWNER, SCRIPT, title="T", expires_at=expires, last_turn_status="running"
            )
            await conv.share(key, OWNER, READER)
            source = await _info(stores, key)
            for who in (OWNER, READER):
                before = await _after(stores, source.updated_at)
                new = await conv.branch(key, who, "a0")
                info = await conv.get_conversation(new, who)
                assert info is not None
                assert info.created_at >= before and info.updated_at >= before, (
                    f"a branch by {who!r} must be stamped at its own time (>= {before}), "
                    f"got created {info.created_at}, updated {info.updated_at}"
                )
                got = (info.owner, info.title, info.shared_with, info.message_count)
                assert got == (who, "T", frozenset(), 2), f"a branch by {who!r}: {info}"
                assert (info.expires_at, info.last_turn_status) == (None, None), (
                    f"a branch by {who!r} inherited expiry or status: {info}"
                )
                others = {OWNER, READER, STRANGER} - {who}
                for other in sorted(others):
                    assert await conv.get_conversation(new, other) is None, (
                        f"{other!r} sees the branch {who!r} made"
                    )
                assert await _info(stores, key) == source, "a branch changed its source"

        self.run(backend, body)
