"""Keys: validation in every store, maximum lengths, and isolation of distinct keys."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentstores.errors import InvalidKeyError, NotFoundError
from agentstores.keys import MAX_ID_BYTES, ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import Harness
from .promises import promise
from .scenarios import raises
from .strategies import NEAR_COLLISIONS, TRICKY_IDS, fresh_tenant, ids

BAD_IDS: tuple[str, ...] = ("", "a\x00b", "x" * (MAX_ID_BYTES + 1), "é" * (MAX_ID_BYTES // 2 + 1))


def padded(prefix: str, size: int = MAX_ID_BYTES) -> str:
    """``prefix`` padded with multi-byte characters to exactly ``size`` UTF-8 bytes."""
    out = prefix
    while len(out.encode()) + 4 <= size:
        out += "🙂"
    return out + "x" * (size - len(out.encode()))


async def write_marks(stores: Stores, key: ConversationKey, principal: str, mark: int) -> None:
    """Write ``mark`` into every store under ``key``."""
    assert await stores.supervision.compare_and_swap(
        key, principal, None, SupervisionRow("running", f"m{mark}", mark)
    ), f"the first CAS on {key} failed: another key's row is visible under it"
    assert await stores.recording.put(key, principal, RecordedEvent(mark, mark, f"m{mark}", mark))
    await stores.state.save(key, principal, {"mark": mark}, epoch=mark)
    await stores.conversations.append_messages(
        key, principal, [Message(f"m{mark}", "user", mark)], expected_tail=None
    )
    await stores.pause_tokens.put(
        "tok", key, principal, mark, await stores.now() + timedelta(hours=1)
    )


async def read_marks(stores: Stores, key: ConversationKey, principal: str) -> Any:
    view = await stores.supervision.read(key, principal)
    rec = await stores.recording.read(key, principal)
    return (
        view.row and (view.row.message_id, view.row.epoch),
        view.fence,
        rec and (rec.index, rec.message),
        await stores.state.load(key, principal),
        [(m.id, m.content) for m in await stores.conversations.read_messages(key, principal)],
    )


def expected_marks(mark: int) -> Any:
    return (f"m{mark}", mark), mark, (mark, mark), {"mark": mark}, [(f"m{mark}", mark)]


async def check_isolated(stores: Stores, keys: list[ConversationKey], principal: str) -> None:
    for i, key in enumerate(keys):
        await write_marks(stores, key, principal, i + 1)
    for i, key in enumerate(keys):
        seen = await read_marks(stores, key, principal)
        assert seen == expected_marks(i + 1), f"{key} reads {seen}: it sees another key's writes"
    for i, key in enumerate(keys):
        assert await stores.pause_tokens.claim("tok", key, principal) == i + 1
    assert await stores.conversations.delete(keys[0], principal)
    for i, key in enumerate(keys[1:], start=2):
        seen = await read_marks(stores, key, principal)
        assert seen == expected_marks(i), f"erasing {keys[0]} changed {key}: {seen}"


class KeyContract(ContractBase):
    @promise("keys.validation")
    def test_bad_ids_raise_invalid_key(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            later = await stores.now() + timedelta(hours=1)
            for bad in BAD_IDS:
                for tenant, session in ((bad, "s"), ("t", bad)):
                    try:
                        ConversationKey(tenant, session)
                    except InvalidKeyError:
                        continue
                    raise AssertionError(f"ConversationKey accepted {bad[:20]!r}")
                calls: list[tuple[str, Any]] = [
                    ("supervision.read principal", stores.supervision.read(key, bad + "\x00")),
                    ("supervision.delete message_id", stores.supervision.delete(key, "p", bad, 1)),
                    ("recording.delete message_id", stores.recording.delete(key, "p", bad)),
                    ("state.save principal", stores.state.save(key, bad + "\x00", {})),
                    (
                        "conversations.list tenant",
                        stores.conversations.list_conversations(bad, "p"),
                    ),
                    (
                        "conversations.truncate message_id",
                        stores.conversations.truncate(key, "p", bad),
                    ),
                    (
                        "conversations.share principal",
                        stores.conversations.share(key, "p", bad + "\x00"),
                    ),
                    ("pause_tokens.put token_id", stores.pause_tokens.put(bad, key, "p", 1, later)),
                    ("pause_tokens.claim token_id", stores.pause_tokens.claim(bad, key, "p")),
                    ("oauth.get tenant", stores.oauth.get_user_integration(bad, "u", "s")),
                    ("oauth.get server", stores.oauth.get_user_integration("t", "u", bad)),
                    ("oauth.find state", stores.oauth.find_by_pending_state(bad)),
                ]
                if bad:  # "" is a valid principal ("no user")
                    calls.append(("recording.read principal", stores.recording.read(key, bad)))
                for what, call in calls:
                    await raises(InvalidKeyError, call, f"{what} = {bad[:20]!r}")
            for bad in BAD_IDS:
                try:
                    Message(bad, "user", "x")
                except InvalidKeyError:
                    continue
                raise AssertionError(f"Message accepted id {bad[:20]!r}")
            assert await stores.state.load(key, "p") == {}, "an invalid call wrote something"
            assert (await stores.supervision.read(key, "p")).fence == 0

        self.run(backend, body)

    @promise("keys.max_length")
    def test_longest_ids_work_everywhere(self, backend: BackendUnderTest) -> None:
        tenant = padded(fresh_tenant())
        principal = padded("user-")
        keys = [
            ConversationKey(tenant, padded("s-")),
            ConversationKey(tenant, "é" * (MAX_ID_BYTES // 2)),
            ConversationKey(tenant, "x" * MAX_ID_BYTES),
        ]
        assert all(len(p.encode()) == MAX_ID_BYTES for p in (tenant, principal, keys[0].session_id))

        async def body(stores: Stores) -> None:
            await check_isolated(stores, keys, principal)
            page = await stores.conversations.list_conversations(tenant, principal)
            assert {i.key for i in page.items} == set(keys[1:]), "listing mangled long ids"
            long_msg = Message(padded("msg-"), "user", "long id")
            await stores.conversations.append_messages(keys[1], principal, [long_msg])
            rows = await stores.conversations.get_transcript(keys[1], principal, index=-1)
            assert rows[0].id == long_msg.id

        self.run(backend, body)

    @promise("keys.isolation")
    def test_near_collisions_stay_apart(self, backend: BackendUnderTest) -> None:
        async def body(stores: Stores) -> None:
            for (t1, s1), (t2, s2) in NEAR_COLLISIONS:
                base = fresh_tenant()
                await check_isolated(
                    stores, [ConversationKey(base + t1, s1), ConversationKey(base + t2, s2)], "p"
                )
            base = fresh_tenant()
            await check_isolated(stores, [ConversationKey(base, s) for s in TRICKY_IDS], "p")

        self.run(backend, body)

        settings = self.profile.hypothesis(max_examples=max(5, self.profile.examples // 2))
        with Harness(backend) as harness:

            @settings
            @given(
                st.lists(
                    st.tuples(st.sampled_from(("", ":", "/", "%", "{", "é", ":x", "%3A")), ids()),
                    min_size=2,
                    max_size=4,
                    unique=True,
                )
            )
            def prop(parts: list[tuple[str, str]]) -> None:
                base = fresh_tenant()
                harness.value(
                    check_isolated(
                        harness.stores, [ConversationKey(base + t, s) for t, s in parts], "p"
                    )
                )

            prop()

    @promise("keys.tenant_scope")
    def test_tenants_do_not_overlap(self, backend: BackendUnderTest) -> None:
        base = fresh_tenant()
        tenants = [base, base + "x", base + ":", base + "%3A", base + "/", base[:-1]]

        async def body(stores: Stores) -> None:
            for t in tenants:
                await stores.conversations.append_messages(
                    ConversationKey(t, "s"), "p", [Message("m", "user", t)]
                )
            for t in tenants:
                page = await stores.conversations.list_conversations(t, "p")
                assert [i.key for i in page.items] == [ConversationKey(t, "s")], (
                    f"listing tenant {t!r} gave {[i.key for i in page.items]}"
                )
            await raises(
                NotFoundError,
                stores.conversations.truncate(ConversationKey(base + "y", "s"), "p", "m"),
                "an absent tenant",
            )

        self.run(backend, body)
