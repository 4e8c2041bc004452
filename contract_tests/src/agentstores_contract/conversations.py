"""ConversationStore: transcript, metadata, truncate/branch, listing, sweeping."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from itertools import pairwise
from typing import Any

import pytest

from agentstores.errors import (
    ConflictError,
    ErasedError,
    NotFoundError,
    NotOwnedError,
    UsageError,
)
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.stores import Expired, IdleFor, OverCap, Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import ConversationMachine, run_machine
from .promises import promise
from .scenarios import raises, stale


def ids_of(messages: Any) -> list[str]:
    return [m.id for m in messages]


SCRIPT = [
    Message("u0", "user", "first question"),
    Message("a0", "assistant", "first answer"),
    Message("t0", "tool", {"result": 1}),
    Message("u1", "user", "second question"),
    Message("s0", "system", "note"),
    Message("a1", "assistant", "second answer"),
    Message("u2", "user", "third question"),
]


class ConversationContract(ContractBase):
    @promise("conversations.model")
    def test_conversation_model(self, backend: BackendUnderTest) -> None:
        run_machine(backend, ConversationMachine, self.profile.hypothesis())

    @promise("conversations.content")
    def test_any_json_content_round_trips(self, backend: BackendUnderTest) -> None:
        key = self.key()
        contents: list[Any] = [
            None,
            True,
            0,
            -(2**53),
            2**53,
            1.5,
            -0.25,
            "",
            "nul\x00inside",
            "é日本🙂\u202e",
            [],
            {},
            [1, [2, [3, {"a": None}]]],
            {"k:/{}": {"..": ["%2F"]}},
            "x" * 100_000,
        ]
        roles = ["user", "assistant", "tool", "system", "other"]
        messages = [
            Message(f"c{i}", roles[i % 5], c, metadata={"i": i, "meta\x00": c}, compaction=False)  # type: ignore[arg-type]
            for i, c in enumerate(contents)
        ]

        async def body(stores: Stores) -> None:
            await stores.conversations.append_messages(key, "p", messages)
            stored = await stores.conversations.read_messages(key, "p")
            got = [(m.id, m.role, m.content, dict(m.metadata)) for m in stored]
            want = [(m.id, m.role, m.content, dict(m.metadata)) for m in messages]
            assert got == want, "contents, roles or metadata changed on the way through the store"

        self.run(backend, body)

    @promise("conversations.order")
    def test_seq_and_created_at(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            for i in range(6):
                batch = [Message(f"m{i}-{j}", "user", j) for j in range(i % 3 + 1)]
                stored = await conv.append_messages(key, "p", batch)
                assert [m.id for m in stored] == [m.id for m in batch]
            everything = await conv.read_messages(key, "p")
            assert [m.seq for m in everything] == list(range(len(everything)))
            stamps = [m.created_at for m in everything]
            assert all(a <= b for a, b in pairwise(stamps)), "created_at went backwards"
            page = await conv.read_messages(key, "p", start=3, limit=4)
            assert [m.seq for m in page] == [3, 4, 5, 6]

        self.run(backend, body)

    @promise("conversations.append.idempotent")
    def test_reappending_is_a_no_op(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, "p", SCRIPT[:3])
            again = await conv.append_messages(key, "p", SCRIPT[:3])
            assert again == [], "re-appending present ids must append nothing and return []"
            stale = await conv.append_messages(key, "p", SCRIPT[1:3], expected_tail="u0")
            assert stale == [], "the idempotency check comes before the tail check"
            mixed = await conv.append_messages(key, "p", SCRIPT[2:5])
            assert [(m.id, m.seq) for m in mixed] == [("u1", 3), ("s0", 4)], (
                "only the messages not yet present are appended"
            )
            assert ids_of(await conv.read_messages(key, "p")) == ids_of(SCRIPT[:5])

        self.run(backend, body)

    @promise("conversations.append.conditional")
    def test_conditional_append(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await stale(
                conv.append_messages(key, "p", SCRIPT[:1], expected_tail="zz"),
                tail=None,
                expected="zz",
                what="a missing conversation's tail is None",
            )
            assert await conv.get_conversation(key, "p") is None, "a stale append created the key"
            await conv.append_messages(key, "p", SCRIPT[:1], expected_tail=None)
            await conv.append_messages(key, "p", SCRIPT[1:2], expected_tail="u0")
            await stale(
                conv.append_messages(key, "p", SCRIPT[2:4], expected_tail="u0"),
                tail="a0",
                expected="u0",
                what="appending on a tail that moved",
            )
            await stale(
                conv.append_messages(key, "p", SCRIPT[2:4], expected_tail=None),
                tail="a0",
                expected=None,
                what="expecting an empty transcript",
            )
            assert ids_of(await conv.read_messages(key, "p")) == ["u0", "a0"]
            info = await conv.get_conversation(key, "p")
            assert info is not None and info.tail_message_id == "a0" and info.message_count == 2

        self.run(backend, body)

    @promise("conversations.append.batch")
    def test_batch_lands_whole_or_not_at_all(self, backend: BackendUnderTest) -> None:
        key = self.key()
        batch = [Message(f"b{i}", "user" if i % 2 else "assistant", i) for i in range(200)]

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, "p", SCRIPT[:1])
            await stale(
                conv.append_messages(key, "p", batch, expected_tail="nope"),
                tail="u0",
                expected="nope",
                what="a refused batch",
            )
            await raises(
                UsageError,
                conv.append_messages(key, "p", [*batch[:3], Message("b1", "user", "dup")]),
                "a batch naming one id twice",
            )
            assert ids_of(await conv.read_messages(key, "p")) == ["u0"], "part of a batch landed"
            stored = await conv.append_messages(key, "p", batch, expected_tail="u0")
            assert [m.seq for m in stored] == list(range(1, 201))
            assert ids_of(await conv.read_messages(key, "p")) == ["u0", *ids_of(batch)]

        self.run(backend, body)

    @promise("conversations.append.create_if_absent")
    def test_create_if_absent_false(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await raises(
                NotFoundError,
                conv.append_messages(key, "p", SCRIPT[:1], create_if_absent=False),
                "create_if_absent=False on a missing key",
            )
            assert await conv.get_conversation(key, "p") is None
            assert await conv.read_messages(key, "p") == []
            assert (await conv.list_conversations(key.tenant, "p")).items == []
            await conv.append_messages(key, "p", SCRIPT[:1])
            await conv.append_messages(key, "p", SCRIPT[1:2], create_if_absent=False)
            assert ids_of(await conv.read_messages(key, "p")) == ["u0", "a0"]

        self.run(backend, body)

    @promise("conversations.metadata")
    def test_metadata_follows_writes(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.set_last_turn_status(key, "p", "running")
            assert await conv.get_conversation(key, "p") is None, (
                "set_last_turn_status on a missing key must create nothing"
            )
            await raises(NotFoundError, conv.set_title(key, "p", "t"), "set_title on a missing key")
            expires = await stores.now() + timedelta(days=1)
            await conv.append_messages(
                key, "p", SCRIPT[:2], title="Title", expires_at=expires, last_turn_status="running"
            )
            first = await conv.get_conversation(key, "p")
            assert first is not None
            assert (first.key, first.owner, first.title, first.expires_at) == (
                key,
                "p",
                "Title",
                expires,
            )
            assert (first.last_turn_status, first.tail_message_id, first.message_count) == (
                "running",
                "a0",
                2,
            )
            assert first.created_at <= first.updated_at
            await conv.set_last_turn_status(key, "p", "complete")
            await conv.set_title(key, "p", None)
            await conv.append_messages(key, "p", SCRIPT[2:4])
            later = await conv.get_conversation(key, "p")
            assert later is not None
            assert (later.title, later.last_turn_status, later.tail_message_id) == (
                None,
                "complete",
                "u1",
            )
            assert later.message_count == 4 and later.expires_at == expires
            assert later.created_at == first.created_at
            assert later.updated_at >= first.updated_at

        self.run(backend, body)

    @promise("transcript.query")
    def test_transcript_queries(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            for m in SCRIPT:  # one append each, so timestamps can differ
                await conv.append_messages(key, "p", [m])

            async def q(**kw: Any) -> list[tuple[int, str]]:
                rows = await conv.get_transcript(key, "p", **kw)
                return [(r.index, r.id) for r in rows]

            assert await q() == list(enumerate(ids_of(SCRIPT)))
            assert await q(index=0, speaker="user") == [(0, "u0")]
            assert await q(index=1, speaker="user") == [(1, "u1")], (
                "speaker filters before indexing"
            )
            assert await q(index=1, speaker="assistant") == [(1, "a1")]
            assert await q(index=-1) == [(6, "u2")]
            assert await q(index=-1, speaker="assistant") == [(1, "a1")]
            assert await q(index=-3, speaker="user") == [(0, "u0")]
            assert await q(index=3, speaker="user") == [], "out of range gives []"
            assert await q(index=-4, speaker="user") == []
            assert await q(index=7) == []
            assert await q(speaker="user") == [(0, "u0"), (1, "u1"), (2, "u2")]
            assert await q(speaker="user", limit=2) == [(0, "u0"), (1, "u1")]
            assert await q(limit=0) == []
            rows = await conv.get_transcript(key, "p", index=2)
            assert rows[0].role == "tool" and rows[0].content == {"result": 1}
            stored = await conv.read_messages(key, "p")
            stamp = {m.id: m.created_at for m in stored}
            window = (stamp["a0"], stamp["a1"])
            inside = [m.id for m in stored if window[0] <= m.created_at <= window[1]]
            assert ids_of(await conv.get_transcript(key, "p", time_range=window)) == inside, (
                "time_range is inclusive at both ends"
            )
            assert "a0" in inside and "a1" in inside
            users = await conv.get_transcript(key, "p", time_range=window, speaker="user")
            assert [r.id for r in users] == [i for i in inside if i.startswith("u")]
            assert all(r.index == int(r.id[1]) for r in users), "index counts users only"
            assert (
                ids_of(await conv.get_transcript(key, "p", time_range=window, limit=1))
                == inside[:1]
            )
            exact = (stamp["u2"], stamp["u2"])
            assert "u2" in ids_of(await conv.get_transcript(key, "p", time_range=exact))
            before = stamp["u0"] - timedelta(days=1)
            assert await conv.get_transcript(key, "p", time_range=(before, before)) == []
            missing = self.key()
            assert await conv.get_transcript(missing, "p") == []
            assert await conv.get_transcript(missing, "p", index=0) == []

        self.run(backend, body)

    @promise("transcript.usage_errors")
    def test_transcript_usage_errors(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, "p", SCRIPT[:2])
            now = await stores.now()
            await raises(
                UsageError,
                conv.get_transcript(key, "p", index=0, time_range=(now, now)),
                "index together with time_range",
            )
            await raises(
                UsageError,
                conv.get_transcript(key, "p", speaker="robot"),  # type: ignore[arg-type]
                "an unknown speaker",
            )
            await raises(
                UsageError,
                conv.get_transcript(self.key(), "p", speaker="tool"),  # type: ignore[arg-type]
                "an unknown speaker on a missing key",
            )

        self.run(backend, body)

    @pytest.mark.parametrize(
        ("target", "kept"),
        [
            ("u1", ["u0", "a0", "t0"]),
            ("a0", ["u0", "a0"]),
            ("t0", ["u0", "a0", "t0"]),
            ("u0", []),
            ("u2", ids_of(SCRIPT[:6])),
            ("s0", ids_of(SCRIPT[:5])),
        ],
    )
    @promise("conversations.truncate")
    def test_truncate(self, backend: BackendUnderTest, target: str, kept: list[str]) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, "p", SCRIPT)
            removed = await conv.truncate(key, "p", target)
            assert removed == len(SCRIPT) - len(kept), f"truncate returned {removed}"
            assert ids_of(await conv.read_messages(key, "p")) == kept
            info = await conv.get_conversation(key, "p")
            assert info is not None
            assert (info.tail_message_id, info.message_count) == (
                kept[-1] if kept else None,
                len(kept),
            )
            await raises(
                NotFoundError, conv.truncate(key, "p", "nope"), "truncate at an unknown id"
            )
            stored = await conv.append_messages(key, "p", [Message("n1", "user", "again")])
            assert stored[0].seq == len(kept), "seq continues from the truncated length"
            again = await conv.append_messages(key, "p", [Message(target, "user", "re")])
            expected = 0 if target in kept else 1
            assert len(again) == expected, "a removed message id can be appended again"

        self.run(backend, body)

    @pytest.mark.parametrize(
        ("target", "cut", "kept"),
        [
            ("u1", "before", ["u0", "a0", "t0"]),
            ("u1", "after", ["u0", "a0", "t0", "u1"]),
            ("a0", "before", ["u0"]),
            ("a0", "after", ["u0", "a0"]),
            ("u0", "before", []),
            ("u0", "after", ["u0"]),
            ("u2", "after", ids_of(SCRIPT)),
            ("s0", "before", ids_of(SCRIPT[:4])),
        ],
    )
    @promise("conversations.truncate.cut")
    def test_truncate_cut(
        self, backend: BackendUnderTest, target: str, cut: str, kept: list[str]
    ) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, "p", SCRIPT)
            removed = await conv.truncate(key, "p", target, cut=cut)  # type: ignore[arg-type]
            assert removed == len(SCRIPT) - len(kept), f"truncate returned {removed}"
            assert ids_of(await conv.read_messages(key, "p")) == kept
            info = await conv.get_conversation(key, "p")
            assert info is not None
            assert (info.tail_message_id, info.message_count) == (
                kept[-1] if kept else None,
                len(kept),
            )
            turns = [m.id for m in SCRIPT if m.id in kept and m.role in ("user", "assistant")]
            assert ids_of(await conv.recent(key, "p", 10)) == turns, "recent after the cut"
            await raises(
                UsageError,
                conv.truncate(key, "p", kept[0] if kept else "u0", cut="middle"),  # type: ignore[arg-type]
                "an unknown cut",
            )
            assert ids_of(await conv.read_messages(key, "p")) == kept, "a refused cut changed"

        self.run(backend, body)

    @promise("conversations.truncate.expected_tail")
    def test_truncate_expected_tail(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, "p", SCRIPT)
            info = await conv.get_conversation(key, "p")
            for wrong in ("a1", "nope"):
                await stale(
                    conv.truncate(key, "p", "u2", cut="before", expected_tail=wrong),
                    tail="u2",
                    expected=wrong,
                    what=f"truncate expecting the tail {wrong!r}",
                )
            await stale(
                conv.truncate(key, "p", "nope", expected_tail="a1"),
                tail="u2",
                expected="a1",
                what="truncate at an unknown id on a stale tail (the tail is checked first)",
            )
            await raises(
                NotOwnedError,
                conv.truncate(key, "other", "u2", expected_tail="a1"),
                "another principal's truncate on a stale tail (the owner is checked first)",
            )
            await raises(
                UsageError, conv.truncate(key, "p", "u2", expected_tail=""), "an empty tail id"
            )
            assert ids_of(await conv.read_messages(key, "p")) == ids_of(SCRIPT), (
                "a refused conditional truncate removed messages"
            )
            assert await conv.get_conversation(key, "p") == info, "a refused truncate changed"
            assert await conv.truncate(key, "p", "u2", cut="before", expected_tail="u2") == 1
            assert await conv.truncate(key, "p", "u1", expected_tail="a1") == 3
            assert ids_of(await conv.read_messages(key, "p")) == ["u0", "a0", "t0"]
            await raises(
                NotFoundError,
                conv.truncate(key, "p", "u1", expected_tail="t0"),
                "truncate at a removed id on the current tail",
            )
            assert await conv.truncate(key, "p", "u0", expected_tail="t0") == 3
            await stale(
                conv.truncate(key, "p", "u0", expected_tail="t0"),
                tail=None,
                expected="t0",
                what="truncate expecting a tail on an empty transcript",
            )
            await raises(
                NotFoundError,
                conv.truncate(self.key("absent"), "p", "u0", expected_tail="u0"),
                "truncate expecting a tail on an absent conversation",
            )
            assert await conv.delete(key, "p")
            await raises(
                ErasedError,
                conv.truncate(key, "p", "u0", expected_tail="t0"),
                "truncate expecting a tail on an erased conversation",
            )

        self.run(backend, body)

    @promise("conversations.tail")
    def test_tail(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            assert await conv.tail(key, "p", 3) is None, "an absent conversation"
            await conv.append_messages(key, "p", SCRIPT)
            info = await conv.get_conversation(key, "p")
            for limit, want in ((3, ["u1", "s0", "a1", "u2"][1:]), (100, ids_of(SCRIPT))):
                found = await conv.tail(key, "p", limit)
                assert found is not None
                assert ids_of(found.messages) == want, f"tail({limit})"
                assert [m.seq for m in found.messages] == list(
                    range(len(SCRIPT) - len(want), len(SCRIPT))
                )
                assert found.info == info, f"tail({limit}) metadata {found.info} != {info}"
                by_id = {m.id: m for m in SCRIPT}
                for m in found.messages:
                    assert (m.role, m.content) == (by_id[m.id].role, by_id[m.id].content)
            empty = await conv.tail(key, "p", 0)
            assert empty is not None and empty.messages == [] and empty.info == info
            assert await conv.tail(key, "q", 3) is None, "another principal sees no conversation"
            await conv.share(key, "p", "q")
            shared = await conv.tail(key, "q", 2)
            assert shared is not None and ids_of(shared.messages) == ["a1", "u2"]
            await raises(UsageError, conv.tail(key, "p", -1), "a negative limit")
            await conv.truncate(key, "p", "u0")
            cleared = await conv.tail(key, "p", 5)
            assert cleared is not None and cleared.messages == []
            assert (cleared.info.message_count, cleared.info.tail_message_id) == (0, None)

        self.run(backend, body)

    @promise("conversations.branch")
    def test_branch(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            flagged = [
                *SCRIPT[:2],
                Message("c0", "system", "summary", {"m": 1}, compaction=True),
                *SCRIPT[2:],
            ]
            await conv.append_messages(key, "owner", flagged, title="Origin")
            new = await conv.branch(key, "owner", "t0")
            assert new.tenant == key.tenant and new != key
            copied = await conv.read_messages(new, "owner")
            assert [(m.role, m.content, dict(m.metadata), m.compaction) for m in copied] == [
                (m.role, m.content, dict(m.metadata), m.compaction) for m in flagged[:4]
            ]
            fresh = ids_of(copied)
            assert len(set(fresh)) == 4 and not set(fresh) & set(ids_of(flagged)), (
                "every branched message gets a fresh id"
            )
            info = await conv.get_conversation(new, "owner")
            assert info is not None and (info.owner, info.title, info.message_count) == (
                "owner",
                "Origin",
                4,
            )
            assert ids_of(await conv.read_messages(key, "owner")) == ids_of(flagged), (
                "branching changed the source"
            )
            await conv.append_messages(new, "owner", [Message("x", "user", "diverge")])
            assert len(await conv.read_messages(key, "owner")) == len(flagged)
            await raises(
                ConflictError,
                conv.branch(key, "owner", "u0", new_session_id=new.session_id),
                "branching onto an existing key",
            )
            await raises(NotFoundError, conv.branch(key, "owner", "nope"), "an unknown message")
            await raises(NotFoundError, conv.branch(key, "stranger", "u0"), "an invisible source")
            await conv.share(key, "owner", "reader")
            mine = await conv.branch(key, "reader", "a0", new_session_id="reader-copy")
            assert mine == ConversationKey(key.tenant, "reader-copy")
            info = await conv.get_conversation(mine, "reader")
            assert info is not None and info.owner == "reader", "a branch belongs to the caller"
            assert len(await conv.read_messages(mine, "reader")) == 2

        self.run(backend, body)

    @promise("conversations.history")
    def test_history_after_compaction(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, "p", SCRIPT[:3])
            assert ids_of(await conv.history(key, "p")) == ids_of(SCRIPT[:3]), (
                "without compaction, history is the whole transcript"
            )
            await conv.append_messages(
                key, "p", [Message("c1", "system", "sum 1", compaction=True)]
            )
            await conv.append_messages(key, "p", SCRIPT[3:5])
            await conv.append_messages(key, "p", [Message("c2", "other", "sum 2", compaction=True)])
            await conv.append_messages(key, "p", SCRIPT[5:])
            hist = await conv.history(key, "p")
            assert ids_of(hist) == ["c2", "a1", "u2"], "history starts at the latest compaction"
            assert hist[0].compaction and [m.seq for m in hist] == [6, 7, 8]
            await conv.truncate(key, "p", "s0")
            assert ids_of(await conv.history(key, "p")) == ["c1", "u1", "s0"]

        self.run(backend, body)

    @promise("conversations.recent")
    def test_recent(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            await conv.append_messages(key, "p", SCRIPT)
            assert ids_of(await conv.recent(key, "p", 3)) == ["u1", "a1", "u2"]
            assert ids_of(await conv.recent(key, "p", 100)) == ["u0", "a0", "u1", "a1", "u2"]
            assert [m.seq for m in await conv.recent(key, "p", 2)] == [5, 6]
            assert await conv.recent(key, "p", 0) == []
            assert await conv.recent(self.key(), "p", 5) == []

        self.run(backend, body)

    @promise("conversations.list")
    def test_keyset_listing(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            sessions = [f"s{i}" for i in range(9)] + ["a:b", "a/b", "é"]
            for s in sessions:
                await conv.append_messages(
                    ConversationKey(tenant, s), "p", [Message("m", "user", s)]
                )
            await conv.append_messages(
                ConversationKey(tenant, "theirs"), "q", [Message("m", "user", 0)]
            )
            await conv.append_messages(
                ConversationKey(tenant + "x", "other-tenant"), "p", [Message("m", "user", 0)]
            )

            async def everything(limit: int, touch_after_first: bool = False) -> list[Any]:
                seen: list[Any] = []
                cursor = None
                for _ in range(len(sessions) + 2):
                    page = await conv.list_conversations(tenant, "p", limit=limit, cursor=cursor)
                    assert len(page.items) <= limit
                    seen.extend(page.items)
                    if touch_after_first and len(seen) == len(page.items):
                        # a concurrent write to an item already listed moves it to the front
                        await conv.append_messages(
                            page.items[-1].key, "p", [Message(f"t{len(seen)}", "user", 1)]
                        )
                    if page.next_cursor is None:
                        return seen
                    cursor = page.next_cursor
                raise AssertionError(f"paging with limit {limit} did not end: {len(seen)} items")

            for limit in (1, 3, 5, 50):
                listed = await everything(limit)
                keys = [i.key.session_id for i in listed]
                assert sorted(keys) == sorted(sessions), (
                    f"pages of {limit} listed {keys}, expected each of {sessions} once"
                )
                order = [(i.updated_at, i.key.session_id) for i in listed]
                assert order == sorted(order, reverse=True), "not newest-updated first"
            listed = await everything(4, touch_after_first=True)
            keys = [i.key.session_id for i in listed]
            assert sorted(keys) == sorted(sessions), (
                f"a write between pages made items repeat or go missing: {keys}"
            )

        self.run(backend, body)

    @promise("conversations.sweep")
    def test_sweep_rules(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()

        def k(s: str) -> ConversationKey:
            return ConversationKey(tenant, s)

        async def body(stores: Stores) -> None:
            conv = stores.conversations
            now = await stores.now()
            await conv.append_messages(
                k("gone"), "p", SCRIPT[:1], expires_at=now - timedelta(seconds=1)
            )
            await conv.append_messages(
                k("kept"), "p", SCRIPT[:1], expires_at=now + timedelta(hours=1)
            )
            await conv.append_messages(k("plain"), "p", SCRIPT[:1])
            found = await conv.find_sweepable(Expired(), limit=1000)
            mine = {key.session_id for key in found if key.tenant == tenant}
            assert "kept" not in mine and "plain" not in mine
            if len(found) < 1000:
                assert "gone" in mine, "find_sweepable(Expired()) missed an expired conversation"
            assert not await conv.erase_if(k("kept"), Expired())
            assert not await conv.erase_if(k("plain"), Expired())
            assert await conv.erase_if(k("gone"), Expired())
            assert await conv.get_conversation(k("gone"), "p") is None
            await raises(
                NotFoundError,
                conv.append_messages(k("gone"), "p", SCRIPT[1:2]),
                "a late write after a sweep",
            )
            for i in range(4):
                await conv.append_messages(k(f"cap{i}"), "q", [Message("m", "user", i)])
            assert not await conv.erase_if(k("cap3"), OverCap(2))
            assert not await conv.erase_if(k("cap2"), OverCap(2))
            assert await conv.erase_if(k("cap0"), OverCap(2))
            assert not await conv.erase_if(k("cap1"), OverCap(3)), "cap recomputed after the erase"
            await asyncio.sleep(0.002)  # so the touch below stamps a later updated_at
            await conv.append_messages(k("cap1"), "q", [Message("again", "user", 0)])
            assert not await conv.erase_if(k("cap1"), OverCap(1)), (
                "erase_if must re-check the rule: a conversation touched mid-sweep survives"
            )
            assert await conv.erase_if(k("cap3"), OverCap(1)), "cap1 is now the newest"
            await asyncio.sleep(0.01)
            assert not await conv.erase_if(k("plain"), IdleFor(timedelta(hours=1)))
            tiny = IdleFor(timedelta(microseconds=1))
            found = await conv.find_sweepable(tiny, limit=100_000)
            if len(found) < 100_000:
                assert k("plain") in found, "find_sweepable(IdleFor) missed an idle conversation"
            assert await conv.erase_if(k("plain"), tiny)
            assert await conv.get_conversation(k("plain"), "p") is None

        self.run(backend, body)
