"""Owner-only writes, no existence leak to unshared readers, read-only sharing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from agentstores.errors import NotFoundError, NotOwnedError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .scenarios import ABSENT_READS, TOKEN, TURN, populate, raises, snapshot

OWNER = "alice"
INTRUDERS = ("bob", "", "Alice", "alice ", "alice\u200b")
EPOCH = 1

Op = Callable[[Stores, ConversationKey, str, str], Awaitable[Any]]
"""``op(stores, key, principal, tag)``."""


async def _later(s: Stores) -> Any:
    return await s.now() + timedelta(hours=1)


OWNED_WRITES: dict[str, Op] = {
    "supervision.cas": lambda s, k, p, t: s.supervision.compare_and_swap(
        k, p, EPOCH, SupervisionRow("running", t, EPOCH + 1)
    ),
    "supervision.delete": lambda s, k, p, t: s.supervision.delete(k, p, TURN, EPOCH),
    "recording.put": lambda s, k, p, t: s.recording.put(k, p, RecordedEvent(9, t, TURN, EPOCH)),
    "recording.delete": lambda s, k, p, t: s.recording.delete(k, p, TURN),
    "state.save": lambda s, k, p, t: s.state.save(k, p, {"by": t}),
    "state.delete": lambda s, k, p, t: s.state.delete(k, p),
    "conversations.append": lambda s, k, p, t: s.conversations.append_messages(
        k, p, [Message(t, "user", "intrusion")]
    ),
    "conversations.set_last_turn_status": lambda s, k, p, t: s.conversations.set_last_turn_status(
        k, p, "cancelled"
    ),
    "conversations.set_title": lambda s, k, p, t: s.conversations.set_title(k, p, t),
    "conversations.set_metadata": lambda s, k, p, t: s.conversations.set_metadata(
        k, p, {"agent": t}
    ),
    "conversations.share": lambda s, k, p, t: s.conversations.share(k, p, t),
    "conversations.unshare": lambda s, k, p, t: s.conversations.unshare(k, p, "reader"),
    "conversations.truncate": lambda s, k, p, t: s.conversations.truncate(k, p, "u1"),
    "conversations.delete": lambda s, k, p, t: s.conversations.delete(k, p),
}


async def _token_put(s: Stores, k: ConversationKey, p: str, t: str) -> Any:
    return await s.pause_tokens.put(t, k, p, "intrusion", await _later(s))


OWNED_WRITES["pause_tokens.put"] = _token_put
OWNED_WRITES["pause_tokens.claim"] = lambda s, k, p, t: s.pause_tokens.claim(TOKEN, k, p)
OWNED_WRITES["pause_tokens.abandon"] = lambda s, k, p, t: s.pause_tokens.abandon(TOKEN, k, p)

TOKEN_CALLS = {"pause_tokens.claim", "pause_tokens.abandon"}
"""A token's owner is the key's owner: others get NotFoundError, as for an unknown token."""

CREATING_WRITES: dict[str, Op] = {
    "supervision": lambda s, k, p, t: s.supervision.compare_and_swap(
        k, p, None, SupervisionRow("running", t, 0)
    ),
    "recording": lambda s, k, p, t: s.recording.put(k, p, RecordedEvent(0, t, t, 0)),
    "state": lambda s, k, p, t: s.state.save(k, p, {"by": t}),
    "conversations": lambda s, k, p, t: s.conversations.append_messages(
        k, p, [Message(t, "user", t)]
    ),
    "pause_tokens": _token_put,
}


async def _shared_setup(stores: Stores, key: ConversationKey) -> None:
    await populate(stores, key, OWNER, EPOCH)
    await stores.conversations.share(key, OWNER, "reader")


class OwnershipContract(ContractBase):
    @pytest.mark.parametrize(
        "name", [pytest.param(n, marks=promise(f"ownership.{n}"), id=n) for n in OWNED_WRITES]
    )
    def test_non_owner_write_is_refused(self, backend: BackendUnderTest, name: str) -> None:
        op = OWNED_WRITES[name]
        key = self.key()
        error = NotFoundError if name in TOKEN_CALLS else NotOwnedError

        async def body(stores: Stores) -> None:
            await _shared_setup(stores, key)
            before = await snapshot(stores, key, OWNER)
            for intruder in (*INTRUDERS, "reader"):
                await raises(
                    error,
                    op(stores, key, intruder, f"by-{intruder}"),
                    f"{name} by {intruder!r} on {OWNER!r}'s key",
                )
                assert await snapshot(stores, key, OWNER) == before, (
                    f"a refused {name} by {intruder!r} changed the data"
                )
            if name == "pause_tokens.put":
                for intruder in INTRUDERS:
                    await raises(
                        NotFoundError,
                        stores.pause_tokens.claim(f"by-{intruder}", key, OWNER),
                        "a refused put created its token",
                    )
            if name in TOKEN_CALLS:
                assert await stores.pause_tokens.claim(TOKEN, key, OWNER) == {"resume": True}, (
                    "a non-owner's claim or abandon used up the owner's token"
                )
                return
            result = await op(stores, key, OWNER, "by-owner")
            assert result is not False, f"{name} by the owner must be accepted"

        self.run(backend, body)

    @promise("ownership.claimed_elsewhere")
    def test_ownership_spans_stores(self, backend: BackendUnderTest) -> None:
        async def body(stores: Stores) -> None:
            for claimed_by, claim in CREATING_WRITES.items():
                key = self.key()
                await claim(stores, key, OWNER, "first")
                for target, write in CREATING_WRITES.items():
                    for intruder in INTRUDERS[:2]:
                        await raises(
                            NotOwnedError,
                            write(stores, key, intruder, "second"),
                            f"{target} write by {intruder!r} on a key claimed through {claimed_by}",
                        )
                    result = await write(stores, key, OWNER, "second")
                    if not (target == claimed_by == "supervision"):
                        assert result is not False, f"the owner's {target} write was refused"

        self.run(backend, body)

    @pytest.mark.parametrize(
        "store",
        [
            pytest.param(s, marks=promise(f"visibility.{s}"), id=s)
            for s in ("supervision", "recording", "state", "conversations", "pause_tokens")
        ],
    )
    def test_unshared_reader_sees_an_absent_key(
        self, backend: BackendUnderTest, store: str
    ) -> None:
        key = self.key()
        absent = ConversationKey(key.tenant, "never-written")

        async def reads(stores: Stores, k: ConversationKey, who: str) -> Any:
            if store == "supervision":
                view = await stores.supervision.read(k, who)
                return view.row, view.fence
            if store == "recording":
                return await stores.recording.read(k, who)
            if store == "state":
                return await stores.state.load(k, who)
            if store == "pause_tokens":
                out = []
                for call in (stores.pause_tokens.claim, stores.pause_tokens.abandon):
                    try:
                        out.append(("value", await call(TOKEN, k, who)))
                    except Exception as exc:
                        out.append(("error", type(exc).__name__))
                return out
            conv = stores.conversations
            out2: list[Any] = [
                await conv.get_conversation(k, who),
                await conv.get_transcript(k, who),
                await conv.get_transcript(k, who, index=0),
                await conv.get_transcript(k, who, index=-1, speaker="user"),
                await conv.recent(k, who, 10),
                await conv.history(k, who),
                await conv.read_messages(k, who),
            ]
            try:
                await conv.branch(k, who, "u1")
                out2.append("branched")
            except Exception as exc:
                out2.append(type(exc).__name__)
            return out2

        async def body(stores: Stores) -> None:
            await _shared_setup(stores, key)
            for who in INTRUDERS:
                seen, baseline = await reads(stores, key, who), await reads(stores, absent, who)
                assert seen == baseline, (
                    f"{store} reads by unshared {who!r} differ from an absent key's: "
                    f"{seen!r} vs {baseline!r}"
                )
            assert await reads(stores, key, OWNER) != await reads(stores, absent, OWNER), (
                "the owner must see the data (the comparison above would be vacuous)"
            )

        self.run(backend, body)

    @promise("visibility.listing")
    def test_listing_shows_only_own(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            await _shared_setup(stores, key)
            for who in (*INTRUDERS, "reader"):
                page = await stores.conversations.list_conversations(key.tenant, who)
                assert page.items == [], f"{who!r} lists {OWNER!r}'s conversation"
            page = await stores.conversations.list_conversations(key.tenant, OWNER)
            assert [i.key for i in page.items] == [key]

        self.run(backend, body)

    @promise("sharing.read_only")
    def test_sharing_grants_reads_only(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await populate(stores, key, OWNER, EPOCH)
            assert await snapshot(stores, key, "reader") == ABSENT_READS
            await raises(NotOwnedError, conv.share(key, "reader", "reader"), "sharing with oneself")
            await raises(NotFoundError, conv.share(self.key(), OWNER, "reader"), "sharing nothing")
            await conv.share(key, OWNER, "reader")
            owner_view, reader_view = (
                await snapshot(stores, key, OWNER),
                await snapshot(stores, key, "reader"),
            )
            assert reader_view == owner_view, "a shared reader must see what the owner sees"
            assert owner_view.info is not None and owner_view.info.shared_with == {"reader"}
            for name in (
                "state.save",
                "conversations.append",
                "supervision.cas",
                "recording.put",
                "conversations.share",
                "conversations.delete",
            ):
                await raises(
                    NotOwnedError,
                    OWNED_WRITES[name](stores, key, "reader", "r"),
                    f"{name} by a shared reader",
                )
            assert await snapshot(stores, key, OWNER) == owner_view
            assert (await conv.list_conversations(key.tenant, "reader")).items == []
            await conv.unshare(key, OWNER, "reader")
            assert await snapshot(stores, key, "reader") == ABSENT_READS, (
                "unshare must hide it again"
            )
            info = await conv.get_conversation(key, OWNER)
            assert info is not None and info.shared_with == frozenset()

        self.run(backend, body)
