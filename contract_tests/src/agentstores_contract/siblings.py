"""Siblings: what a write does to one key it does to no other.

Near-collision tests give every key its own epoch, so a rule that matched a row by tenant
alone (or by session id alone) still picked the right one. Here the siblings are alike
on purpose: two keys of one tenant and the same session id in another tenant, leased at
the same epoch, holding tokens of the same id, owned by the same principal. Then one of
them is heartbeaten, taken over, released and erased, and the others must not notice.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from agentstores.errors import FencedError, NotOwnedError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import UNSET, OverCap, Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .lifetimes import wait_for
from .promises import promise
from .scenarios import raises

OWNER = "p"
NAMESAKE_TTL = timedelta(milliseconds=500)
"""The tombstone TTL of the namesake check (waited for on the store clock)."""


async def _rows(stores: Stores, keys: list[ConversationKey]) -> list[object]:
    out: list[object] = []
    for key in keys:
        view = await stores.supervision.read(key, OWNER)
        out.append(view.row and (view.row.message_id, view.row.epoch))
    return out


async def _writes_at(
    stores: Stores, key: ConversationKey, epoch: int, mark: str, index: int
) -> None:
    """Every fenced write at ``epoch``: each must be accepted."""
    await stores.state.save(key, OWNER, {"mark": mark}, epoch=epoch)
    await stores.conversations.append_messages(
        key, OWNER, [Message(mark, "assistant", mark)], epoch=epoch
    )
    assert await stores.recording.put(key, OWNER, RecordedEvent(index, mark, mark, epoch)), (
        f"a snapshot at epoch {epoch} on {key} was refused: another key's fence reached it"
    )


class SiblingContract(ContractBase):
    @promise("keys.siblings")
    def test_one_keys_lease_and_erasure_leave_its_siblings_alone(
        self, backend: BackendUnderTest
    ) -> None:
        t1, t2 = self.tenant("sib"), self.tenant("sib")
        a, b, c = ConversationKey(t1, "s1"), ConversationKey(t1, "s2"), ConversationKey(t2, "s1")
        siblings = [b, c]

        async def body(stores: Stores) -> None:
            later = await stores.now() + timedelta(hours=1)
            for key in (b, c, a):  # a last, at a higher epoch than its siblings'
                epoch = 3 if key == a else 1
                await stores.conversations.append_messages(key, OWNER, [Message("u", "user", 0)])
                assert await stores.supervision.compare_and_swap(
                    key, OWNER, None, SupervisionRow("running", f"m-{key.session_id}", epoch)
                )
                await stores.pause_tokens.put("tok", key, OWNER, key.tenant, later)
            before = await _rows(stores, siblings)
            for key in siblings:
                await _writes_at(stores, key, 1, "after-claim", 1)
            assert await stores.supervision.compare_and_swap(
                a, OWNER, 3, SupervisionRow("running", "beat", 3)
            ), "a heartbeat at the lease's own epoch was refused"
            assert await _rows(stores, siblings) == before, "a heartbeat moved another key's row"
            assert await stores.supervision.compare_and_swap(
                a, OWNER, 3, SupervisionRow("running", "taken", 5)
            )
            assert await _rows(stores, siblings) == before, "a takeover moved another key's row"
            for key in siblings:
                await _writes_at(stores, key, 1, "after-takeover", 2)
            await raises(
                FencedError, stores.state.save(a, OWNER, {}, epoch=1), "the taken-over key"
            )
            twin = ConversationKey(t1, "s3")  # leased exactly as a is now
            assert await stores.supervision.compare_and_swap(
                twin, OWNER, None, SupervisionRow("running", "taken", 5)
            )
            assert await stores.supervision.delete(a, OWNER, "taken", 5)
            assert await _rows(stores, siblings) == before, "a release removed another key's row"
            assert await _rows(stores, [twin]) == [("taken", 5)], (
                "releasing one key removed another key's row of the same message and epoch"
            )
            for key in siblings:
                await _writes_at(stores, key, 1, "after-release", 3)
            assert await stores.conversations.delete(a, OWNER)
            for key in siblings:
                assert await stores.pause_tokens.claim("tok", key, OWNER) == key.tenant, (
                    f"erasing {a} took {key}'s pause token"
                )
                assert len(await stores.conversations.read_messages(key, OWNER)) == 4

        self.run(backend, body)

    @promise("keys.siblings")
    def test_an_owners_counts_are_per_tenant(self, backend: BackendUnderTest) -> None:
        t1, t2 = self.tenant("cap"), self.tenant("cap")

        async def body(stores: Stores) -> None:
            async def create(tenant: str, session_id: str) -> None:
                await stores.conversations.append_messages(
                    ConversationKey(tenant, session_id), OWNER, [Message("u", "user", 0)]
                )

            # Created in this order, so updated_at and session id order them alike; the
            # owner holds one conversation in t2 while the first erasure in t1 runs.
            await create(t2, "s1")
            for s in ("s1", "s2", "s3"):
                await create(t1, s)
            assert await stores.conversations.delete(ConversationKey(t1, "s1"), OWNER)
            await create(t2, "s2")
            await create(t2, "s3")
            assert await stores.conversations.delete(ConversationKey(t1, "s2"), OWNER)
            ours = {t1, t2}
            over = [
                k
                for k in await stores.conversations.find_sweepable(OverCap(2), limit=1000)
                if k.tenant in ours
            ]
            assert over == [ConversationKey(t2, "s1")], (
                f"over a cap of 2, with one conversation left in {t1} and three in {t2}, "
                f"the sweep offers {over}: an erasure in one tenant moved the owner's count "
                "in another"
            )
            alone = ConversationKey(t1, "s3")  # its owner's only one in t1, older than two in t2
            assert not await stores.conversations.erase_if(alone, OverCap(1)), (
                "erase_if(OverCap(1)) erased the owner's only conversation in its tenant: the "
                "recheck counted the owner's conversations in another tenant"
            )
            assert await stores.conversations.get_conversation(alone, OWNER) is not None
            assert await stores.conversations.erase_if(ConversationKey(t2, "s1"), OverCap(2))

        self.run(backend, body)

    @promise("keys.siblings")
    def test_reusing_a_lapsed_key_leaves_every_other_key_alone(
        self, backend: BackendUnderTest
    ) -> None:
        """One session id erased in two tenants, and another session id erased in the
        same tenant, every tombstone past its TTL: a new owner claiming one key claims
        that one only (a claim that matched lapsed tombstones by session id alone, or by
        tenant alone, would hand the others to the same owner). On the real clock, with a
        short TTL: a sweep purges lapsed tombstones, so the lifetimes' own shared wait
        cannot catch this."""
        assert backend.open_with is not None, (
            "the contract makes tombstone_ttl a backend option, but this BackendUnderTest "
            "has no open_with to set it"
        )
        opened = backend.open_with(tombstone_ttl=NAMESAKE_TTL)
        tenant = self.tenant()
        key = ConversationKey(tenant, "reused")
        namesake = ConversationKey(tenant + "-namesake", "reused")
        sibling = ConversationKey(tenant, "reused-sibling")

        async def body() -> None:
            async with opened as stores:
                for erased in (namesake, sibling, key):
                    await stores.conversations.append_messages(
                        erased, OWNER, [Message("m", "user", 1)]
                    )
                    assert await stores.conversations.delete(erased, OWNER)
                await wait_for(stores, await stores.now() + NAMESAKE_TTL + NAMESAKE_TTL / 2)
                row = SupervisionRow("running", "turn", 1)
                assert await stores.supervision.compare_and_swap(key, "heir", None, row)
                await stores.conversations.append_messages(key, "heir", [Message("h", "user", 1)])
                assert [m.id for m in await stores.conversations.read_messages(key, "heir")] == [
                    "h"
                ]
                assert (await stores.supervision.read(namesake, "heir")).row is None, (
                    "claiming a lapsed key claimed its session id in another tenant"
                )
                assert await stores.conversations.get_conversation(namesake, "heir") is None
                stored = await stores.conversations.append_messages(
                    namesake, "another", [Message("o", "user", 1)]
                )
                assert [m.id for m in stored] == ["o"], (
                    "after its TTL, another owner could not use the session id in another "
                    "tenant once a lapsed key of the same id was claimed"
                )
                assert await stores.conversations.get_conversation(sibling, "heir") is None, (
                    "claiming a lapsed key claimed another lapsed key of its tenant"
                )
                stored = await stores.conversations.append_messages(
                    sibling, "another", [Message("o", "user", 1)]
                )
                assert [m.id for m in stored] == ["o"], (
                    "after its TTL, another owner could not use a key once a lapsed key "
                    "of the same tenant was claimed"
                )

        asyncio.run(body())

    @promise("keys.siblings")
    def test_a_namesake_in_another_tenant_grants_nothing(self, backend: BackendUnderTest) -> None:
        """The writer owns the same session id in another tenant, at a lower fence: an
        append to the key it does not own is refused, and one below the key's own fence
        is fenced, through every append path (one message of neither speaker under a tail
        check, the path a backend may shorten, and a plain one). A rule that found the
        key's header by session id alone could judge the write by the namesake's."""
        t1, t2 = self.tenant("namesake"), self.tenant("namesake")
        theirs, mine = ConversationKey(t1, "s"), ConversationKey(t2, "s")
        fenced, low = ConversationKey(t1, "f"), ConversationKey(t2, "f")

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(theirs, "q", [Message("q0", "user", "q")])
            await conv.append_messages(mine, OWNER, [Message("p0", "user", "p")])
            for tail in ("q0", UNSET):
                await raises(
                    NotOwnedError,
                    conv.append_messages(
                        theirs, OWNER, [Message("x", "tool", "x")], expected_tail=tail
                    ),
                    f"an append to another principal's key (tail check: {tail!r}) while "
                    "the writer owns its namesake in another tenant",
                )
            await conv.append_messages(fenced, OWNER, [Message("f0", "user", "f")])
            await stores.state.save(fenced, OWNER, {"at": 5}, epoch=5)
            await conv.append_messages(low, OWNER, [Message("l0", "user", "l")])
            await stores.state.save(low, OWNER, {"at": 1}, epoch=1)
            for tail in ("f0", UNSET):
                await raises(
                    FencedError,
                    conv.append_messages(
                        fenced, OWNER, [Message("y", "tool", "y")], expected_tail=tail, epoch=1
                    ),
                    f"an append below the key's fence (tail check: {tail!r}) while its "
                    "namesake in another tenant is at that epoch",
                )
            assert [m.id for m in await conv.read_messages(theirs, "q")] == ["q0"]
            assert [m.id for m in await conv.read_messages(fenced, OWNER)] == ["f0"]
            # And the other way round: raising one key's fence leaves its namesake's,
            # the key's and its lease's alike.
            row = SupervisionRow("running", "turn", 1)
            assert await stores.supervision.compare_and_swap(low, OWNER, None, row)
            await stores.state.save(fenced, OWNER, {"at": 6}, epoch=6)
            await stores.state.save(low, OWNER, {"at": 1}, epoch=1)
            assert await stores.supervision.compare_and_swap(low, OWNER, 1, row), (
                "a fence raised on one key refused its namesake's heartbeat in another tenant"
            )
            assert (await stores.supervision.read(low, OWNER)).fence == 1

        self.run(backend, body)

    @promise("conversations.speakers")
    def test_a_reply_appended_alone_is_found_by_speaker(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, OWNER, [Message("u1", "user", "q")])
            await conv.append_messages(
                key, OWNER, [Message("a1", "assistant", "r")], expected_tail="u1"
            )
            await conv.append_messages(key, OWNER, [Message("t1", "tool", "x")], expected_tail="a1")
            await conv.append_messages(
                key, OWNER, [Message("u2", "user", "q2")], expected_tail="t1"
            )
            assert [m.id for m in await conv.recent(key, OWNER, 10)] == ["u1", "a1", "u2"]
            said = await conv.get_transcript(key, OWNER, speaker="assistant")
            assert [m.id for m in said] == ["a1"], f"by speaker: {said}"
            last = await conv.get_transcript(key, OWNER, index=-1, speaker="assistant")
            assert [m.id for m in last] == ["a1"], f"the last assistant message: {last}"
            now = await stores.now()
            window = (now - timedelta(hours=1), now + timedelta(hours=1))
            two = await conv.get_transcript(key, OWNER, time_range=window, speaker="user", limit=1)
            assert len(two) == 1, f"a time window with limit=1 returned {len(two)} messages"

        self.run(backend, body)
