"""Store outcomes the broader contract tests leave implicit: every fenced write raises the
key's fence, an erased key answers ErasedError (not just "absent") saying until when,
truncation leaves no stale speaker view, a listing's last page has no cursor, filters and
ranks keep to their scope, and a deletion spares other keys.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from agentstores.errors import ErasedError
from agentstores.keys import ConversationKey
from agentstores.models import (
    ClientInfo,
    Message,
    PendingAuthorization,
    RecordedEvent,
    UserIntegration,
)
from agentstores.stores import OverCap, Stores
from agentstores.stores.kit import DEFAULT_TOMBSTONE_TTL

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise

USER = "owner"
OTHER = "someone-else"


async def _conversation(stores: Stores, key: ConversationKey, *ids: str) -> None:
    messages = [Message(i, "user" if i.startswith("u") else "assistant", i) for i in ids]
    await stores.conversations.append_messages(key, USER, messages)


ERASED_TTL = timedelta(hours=5, minutes=7, seconds=11)
"""The tombstone TTL the erased-error check sets: unlike any default, so a backend that
ignores the option, or reports a fixed lapse time, is caught."""

_INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
"""An instant as the erased message writes it (UTC, to the second, rounded up)."""

CLOCK_RESOLUTION = timedelta(milliseconds=1)
"""How far ``ErasedError.until`` may stray from erase time + TTL: the coarsest store clock
(a Redis expiry is kept in milliseconds)."""


def _with_known_ttl(backend: BackendUnderTest) -> tuple[Stores, timedelta]:
    """A fresh bundle and the tombstone TTL it applies: :data:`ERASED_TTL` where the
    backend takes options, else the contract's default."""
    if backend.open_with is None:
        return backend.open(), DEFAULT_TOMBSTONE_TTL
    return backend.open_with(tombstone_ttl=ERASED_TTL), ERASED_TTL


async def _in(bundle: Stores, body: Callable[[Stores], Awaitable[None]]) -> None:
    async with bundle as stores:
        await body(stores)


def _says_until(error: ErasedError, write: str, earliest: datetime, latest: datetime) -> None:
    """``error.until`` is when the tombstone lapses (erase time + TTL, store clock, UTC),
    and the message names that instant and the way forward."""
    until = error.until
    assert until is not None, f"{write}: ErasedError.until is None; the store knows when"
    assert until.utcoffset() == timedelta(0), f"{write}: until {until!r} is not UTC"
    low, high = earliest - CLOCK_RESOLUTION, latest + CLOCK_RESOLUTION
    assert low <= until <= high, (
        f"{write}: until {until.isoformat()} is not erase time + tombstone_ttl "
        f"(between {earliest.isoformat()} and {latest.isoformat()})"
    )
    message = str(error)
    found = _INSTANT.search(message)
    assert found is not None, f"{write}: {message!r} does not say until when"
    said = datetime.strptime(found.group(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert until <= said < until + timedelta(seconds=1), (
        f"{write}: the message says {found.group()}, .until is {until.isoformat()}"
    )
    assert "new session id" in message, f"{write}: {message!r} does not say what to do"


class StoreEdgesContract(ContractBase):
    @promise("fencing.every_write")
    def test_every_fenced_write_raises_the_fence(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            await _conversation(stores, key, "u1", "a1", "u2")
            later = await stores.now() + timedelta(days=1)
            c, r, s, p = stores.conversations, stores.recording, stores.state, stores.pause_tokens
            writes: dict[str, Callable[..., Awaitable[object]]] = {
                "conversations.set_title": lambda e: c.set_title(key, USER, "t", epoch=e),
                "conversations.set_metadata": lambda e: c.set_metadata(
                    key, USER, {"e": e}, epoch=e
                ),
                "conversations.set_last_turn_status": lambda e: c.set_last_turn_status(
                    key, USER, "complete", epoch=e
                ),
                "conversations.truncate": lambda e: c.truncate(key, USER, "u2", epoch=e),
                "recording.put": lambda e: r.put(key, USER, RecordedEvent(1, "x", "m1", e)),
                "recording.delete": lambda e: r.delete(key, USER, "m1", epoch=e),
                "state.save": lambda e: s.save(key, USER, {"n": e}, epoch=e),
                "state.delete": lambda e: s.delete(key, USER, epoch=e),
                "pause_tokens.put": lambda e: p.put(f"t{e}", key, USER, {}, later, epoch=e),
            }
            for epoch, (name, write) in enumerate(writes.items(), start=1):
                await write(10 * epoch)
                view = await stores.supervision.read(key, USER)
                assert view.fence == 10 * epoch, f"{name} did not raise the fence"
            info = await stores.conversations.get_conversation(key, USER)
            assert info is not None and info.title == "t" and info.message_count == 2

        self.run(backend, body)

    @promise("erasure.erased_error")
    def test_writes_on_an_erased_key_say_erased(self, backend: BackendUnderTest) -> None:
        key = self.key()
        bundle, ttl = _with_known_ttl(backend)

        async def body(stores: Stores) -> None:
            await _conversation(stores, key, "u1", "a1")
            before = await stores.now()
            assert await stores.conversations.delete(key, USER)
            after = await stores.now()
            later = after + timedelta(days=1)
            c, r, s, p = stores.conversations, stores.recording, stores.state, stores.pause_tokens
            writes: dict[str, Callable[..., Awaitable[object]]] = {
                "conversations.set_title": lambda: c.set_title(key, USER, "late"),
                "conversations.set_metadata": lambda: c.set_metadata(key, USER, {"late": 1}),
                "conversations.truncate": lambda: c.truncate(key, USER, "u1"),
                "conversations.append_messages": lambda: c.append_messages(
                    key, USER, [Message("u2", "user", "late")], create_if_absent=False
                ),
                "conversations.append_messages(create)": lambda: c.append_messages(
                    key, USER, [Message("u3", "user", "late")]
                ),
                "conversations.share": lambda: c.share(key, USER, OTHER),
                "recording.put": lambda: r.put(key, USER, RecordedEvent(1, "x", "m1", 1)),
                "recording.delete": lambda: r.delete(key, USER, "m1"),
                "state.save": lambda: s.save(key, USER, {"late": True}),
                "state.delete": lambda: s.delete(key, USER),
                "pause_tokens.put": lambda: p.put("tok", key, USER, {}, later),
            }
            for name, write in writes.items():
                with pytest.raises(ErasedError) as raised:
                    await write()
                _says_until(raised.value, name, before + ttl, after + ttl)
            assert await stores.supervision.delete(key, USER, "a1", 1) is False

        asyncio.run(_in(bundle, body))

    @promise("erasure.default_lifetime")
    def test_tombstones_last_the_documented_default(self, backend: BackendUnderTest) -> None:
        """A bundle opened without options keeps a tombstone for DEFAULT_TOMBSTONE_TTL (30
        days), whatever lifetime other bundles of the backend were opened with."""
        key = self.key()

        async def body(stores: Stores) -> None:
            await _conversation(stores, key, "u1")
            before = await stores.now()
            assert await stores.conversations.delete(key, USER)
            after = await stores.now()
            with pytest.raises(ErasedError) as raised:
                await stores.state.save(key, USER, {"late": True})
            lapse = (before + DEFAULT_TOMBSTONE_TTL, after + DEFAULT_TOMBSTONE_TTL)
            _says_until(raised.value, "state.save", *lapse)

        self.run(backend, body)

    @promise("erasure.spares_others")
    def test_deleting_a_key_spares_other_keys(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()
        stateful, doomed, kept = (ConversationKey(tenant, s) for s in ("state", "doomed", "kept"))

        async def body(stores: Stores) -> None:
            later = await stores.now() + timedelta(days=1)
            await stores.state.save(stateful, USER, {"only": "state"})
            assert await stores.conversations.delete(stateful, USER)
            assert await stores.state.load(stateful, USER) == {}
            for key in (doomed, kept):
                await _conversation(stores, key, "u1")
                await stores.pause_tokens.put("tok", key, USER, {"for": key.session_id}, later)
            assert await stores.conversations.delete(doomed, USER)
            assert await stores.pause_tokens.claim("tok", kept, USER) == {"for": "kept"}

        self.run(backend, body)

    @promise("conversations.truncate_views")
    def test_truncation_leaves_no_stale_view(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await _conversation(stores, key, "u1", "a1", "u2", "a2")
            assert await c.truncate(key, USER, "u2") == 2
            users = await c.get_transcript(key, USER, speaker="user")
            assert [m.id for m in users] == ["u1"]
            assert [m.id for m in await c.recent(key, USER, 10)] == ["u1", "a1"]
            await _conversation(stores, key, "u3")
            users = await c.get_transcript(key, USER, speaker="user")
            assert [m.id for m in users] == ["u1", "u3"]

        self.run(backend, body)

    @promise("listing.last_page")
    def test_last_page_has_no_cursor(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()

        async def body(stores: Stores) -> None:
            for session in ("a", "b"):
                await _conversation(stores, ConversationKey(tenant, session), "u1")
            for limit in (2, 3):
                page = await stores.conversations.list_conversations(tenant, USER, limit=limit)
                assert len(page.items) == 2 and page.next_cursor is None, limit
            first = await stores.conversations.list_conversations(tenant, USER, limit=1)
            assert first.next_cursor is not None

        self.run(backend, body)

    @promise("conversations.branch_stamps")
    def test_branch_has_its_own_stamps(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            await _conversation(stores, key, "u1", "a1")
            new_key = await stores.conversations.branch(key, USER, "a1")
            info = await stores.conversations.get_conversation(new_key, USER)
            assert info is not None and info.message_count == 2
            assert isinstance(info.created_at, datetime)
            assert isinstance(info.updated_at, datetime)

        self.run(backend, body)

    @promise("sweep.over_cap_scope")
    def test_over_cap_ranks_one_owner_in_one_tenant(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()
        mine, theirs = ConversationKey(tenant, "a-mine"), ConversationKey(tenant, "b-theirs")

        async def body(stores: Stores) -> None:
            await _conversation(stores, mine, "u1")
            await stores.conversations.append_messages(theirs, OTHER, [Message("u1", "user", 1)])
            assert not await stores.conversations.erase_if(mine, OverCap(1))
            assert mine not in await stores.conversations.find_sweepable(OverCap(1), limit=1000)
            assert await stores.conversations.get_conversation(mine, USER) is not None

        self.run(backend, body)

    @promise("visibility.supervision_now")
    def test_invisible_supervision_read_still_has_the_clock(
        self, backend: BackendUnderTest
    ) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            await _conversation(stores, key, "u1")
            view = await stores.supervision.read(key, OTHER)
            assert view.row is None and view.fence == 0
            assert isinstance(view.now, datetime)

        self.run(backend, body)

    @promise("upserts.replace")
    def test_a_save_replaces_what_it_leaves_out(self, backend: BackendUnderTest) -> None:
        key, tenant = self.key(), self.tenant()

        async def body(stores: Stores) -> None:
            await stores.state.save(key, USER, {"a": 1, "b": {"c": 2, "d": 3}})
            await stores.state.save(key, USER, {"b": {"c": 2}})
            assert await stores.state.load(key, USER) == {"b": {"c": 2}}

            snapshot = {"parts": ["x", "y"], "tool": {"name": "t", "args": 1}}
            assert await stores.recording.put(key, USER, RecordedEvent(1, snapshot, "m", 1))
            later = {"parts": ["x"], "tool": {"name": "t"}}
            assert await stores.recording.put(key, USER, RecordedEvent(2, later, "m", 1))
            event = await stores.recording.read(key, USER)
            assert event is not None and event.message == later, event

            await stores.conversations.append_messages(
                key, USER, [Message("u", "user", "q")], title="t", metadata={"x": 1, "y": 2}
            )
            await stores.conversations.set_title(key, USER, None)
            await stores.conversations.set_metadata(key, USER, {"x": None})
            info = await stores.conversations.get_conversation(key, USER)
            assert info is not None and (info.title, dict(info.metadata)) == (None, {"y": 2})

            oauth = stores.oauth
            await oauth.save_client_info(ClientInfo(tenant, "srv", {"id": "a", "secret": "s"}))
            await oauth.save_client_info(ClientInfo(tenant, "srv", {"id": "a"}))
            client = await oauth.get_client_info(tenant, "srv")
            assert client is not None and dict(client.client_info) == {"id": "a"}, client

            expires = await stores.now() + timedelta(minutes=10)
            pending = PendingAuthorization(
                f"state-{tenant}",
                "https://a/x",
                "v",
                "https://a/t",
                "https://c/cb",
                expires,
                resource="https://r",
            )
            tokens = {"access": "x", "refresh": "y"}
            await oauth.save_user_integration(UserIntegration(tenant, "u", "srv", pending, tokens))
            narrower = PendingAuthorization(
                pending.state, "https://a/x", "v", "https://a/t", "https://c/cb", expires
            )
            again = UserIntegration(tenant, "u", "srv", narrower, {"access": "x"})
            await oauth.save_user_integration(again)
            got = await oauth.get_user_integration(tenant, "u", "srv")
            assert got is not None and got.pending is not None, got
            assert (got.pending.resource, dict(got.tokens or {})) == (None, {"access": "x"}), got
            await oauth.save_user_integration(UserIntegration(tenant, "u", "srv"))
            got = await oauth.get_user_integration(tenant, "u", "srv")
            assert got is not None and (got.pending, got.tokens) == (None, None), got
            assert await oauth.find_by_pending_state(pending.state) is None

        self.run(backend, body)

    @promise("oauth.filters")
    def test_oauth_listings_filter_and_sort(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()

        async def body(stores: Stores) -> None:
            o = stores.oauth
            for server in ("b", "a", "c"):
                await o.save_user_integration(UserIntegration(tenant, "user", server))
                await o.save_client_info(ClientInfo(tenant, server, {"id": server}))
            everything = await o.list_user_integrations(tenant, "user")
            assert [r.server_name for r in everything] == ["a", "b", "c"]
            chosen = await o.list_user_integrations(tenant, "user", ["c", "a"])
            assert [r.server_name for r in chosen] == ["a", "c"]
            clients = await o.list_client_info(tenant, ["c", "b"])
            assert [r.server_name for r in clients] == ["b", "c"]
            assert [r.server_name for r in await o.list_client_info(tenant)] == ["a", "b", "c"]

        self.run(backend, body)
