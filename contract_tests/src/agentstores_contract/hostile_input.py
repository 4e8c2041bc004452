"""Hostile and careless input: JSON nested too deep, lone surrogates, datetimes outside
the UTC range, forged listing cursors, out-of-range sweep rules and oversized appends are
each a ``UsageError`` on every backend, raised before anything is sent, and the refusal
loses nothing: what the key held stays as it was and the bundle keeps working.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.models import (
    JSON,
    MAX_COUNTER,
    ClientInfo,
    Message,
    PendingAuthorization,
    RecordedEvent,
    UserIntegration,
)
from agentstores.stores import Expired, IdleFor, OverCap, Stores
from agentstores.stores._base import MAX_JSON_DEPTH
from agentstores.stores.conversations import MAX_APPEND_BYTES, MAX_IDLE, MAX_MESSAGE_BYTES
from agentstores.stores.kit import UNIX_EPOCH, encode_cursor, to_micros

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .scenarios import TOKEN, populate, raises, snapshot

PENDING_TEXT = ("state", "auth_url", "code_verifier", "token_endpoint", "redirect_uri", "resource")
"""The text fields of a pending OAuth authorization."""
OWNER = "owner"
EPOCH = 1
SERVER = "srv"

Write = Callable[[Any], Awaitable[Any]]
Call = Callable[[], Awaitable[Any]]


def nested(depth: int) -> JSON:
    """A JSON value ``depth`` levels deep (objects and arrays in turn), built without
    recursion so any depth can be made."""
    value: JSON = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def _cursor(payload: Any) -> str:
    """A forged cursor: ``payload`` as JSON, base64url, as the library writes its own."""
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _pending(**fields: str) -> PendingAuthorization:
    values = {
        "state": "state-1",
        "auth_url": "https://auth.example/authorize",
        "code_verifier": "verifier",
        "token_endpoint": "https://auth.example/token",
        "redirect_uri": "http://localhost/callback",
        "resource": "https://api.example/",
    }
    values.update(fields)
    return PendingAuthorization(
        state=values["state"],
        auth_url=values["auth_url"],
        code_verifier=values["code_verifier"],
        token_endpoint=values["token_endpoint"],
        redirect_uri=values["redirect_uri"],
        expires_at=datetime(2099, 1, 1, tzinfo=UTC),
        resource=values["resource"],
    )


def json_writes(stores: Stores, key: ConversationKey, later: datetime) -> dict[str, Write]:
    """Every write that takes a JSON value, as ``value -> awaitable``; the value is
    passed as it is wherever the store takes any JSON, else wrapped one level down."""
    c, tenant = stores.conversations, key.tenant
    return {
        "message content": lambda v: c.append_messages(key, OWNER, [Message("j", "user", v)]),
        "message metadata": lambda v: c.append_messages(
            key, OWNER, [Message("j", "user", "x", metadata={"m": v})]
        ),
        "append(metadata=)": lambda v: c.append_messages(key, OWNER, [], metadata={"m": v}),
        "set_metadata": lambda v: c.set_metadata(key, OWNER, {"m": v}),
        "state.save": lambda v: stores.state.save(key, OWNER, {"s": v}),
        "recording.put": lambda v: stores.recording.put(
            key, OWNER, RecordedEvent(9, v, "turn-1", EPOCH)
        ),
        "pause_tokens.put": lambda v: stores.pause_tokens.put("j", key, OWNER, v, later),
        "oauth tokens": lambda v: stores.oauth.save_user_integration(
            UserIntegration(tenant, OWNER, SERVER, tokens={"t": v})
        ),
        "oauth client info": lambda v: stores.oauth.save_client_info(
            ClientInfo(tenant, SERVER, {"c": v})
        ),
    }


def text_writes(
    stores: Stores, key: ConversationKey, text: str, later: datetime
) -> dict[str, Call]:
    """Every call that takes ``text`` where a store takes a str (ids, a title, metadata
    names, OAuth fields), as a call of no arguments."""
    c, o = stores.conversations, stores.oauth
    calls: dict[str, Call] = {
        "set_title": lambda: c.set_title(key, OWNER, text),
        "append(title=)": lambda: c.append_messages(key, OWNER, [], title=text),
        "set_metadata name": lambda: c.set_metadata(key, OWNER, {text: 1}),
        "principal": lambda: c.append_messages(key, text, [Message("x", "user", 1)]),
        "expected_tail": lambda: c.append_messages(
            key, OWNER, [Message("x", "user", 1)], expected_tail=text
        ),
        "token id": lambda: stores.pause_tokens.put(text, key, OWNER, {}, later),
        "listing tenant": lambda: c.list_conversations(text, OWNER),
        "pending state lookup": lambda: o.find_by_pending_state(text),
    }
    for field in PENDING_TEXT:
        record = UserIntegration(key.tenant, OWNER, SERVER, pending=_pending(**{field: text}))
        calls[f"pending {field}"] = functools.partial(o.save_user_integration, record)
    return calls


async def _oauth(stores: Stores, tenant: str) -> tuple[Any, ...]:
    o = stores.oauth
    return (
        await o.list_user_integrations(tenant, OWNER),
        await o.list_client_info(tenant),
    )


async def _refused(stores: Stores, key: ConversationKey, call: Call, what: str) -> None:
    """``call()`` raises ``UsageError`` and every store of ``key`` (and its tenant's
    OAuth records) reads exactly as before."""
    before = await snapshot(stores, key, OWNER), await _oauth(stores, key.tenant)
    await raises(UsageError, call(), what)
    after = await snapshot(stores, key, OWNER), await _oauth(stores, key.tenant)
    assert after == before, f"{what}: a refused call changed what the key holds"


async def _still_works(stores: Stores, key: ConversationKey, what: str) -> None:
    """After the refusals the bundle still writes and reads, and the token is there."""
    await stores.conversations.append_messages(key, OWNER, [Message("after", "user", what)])
    tail = await stores.conversations.read_messages(key, OWNER, start=4)
    assert [m.id for m in tail] == ["after"], f"{what}: the bundle no longer appends"
    assert await stores.pause_tokens.claim(TOKEN, key, OWNER) == {"resume": True}, (
        f"{what}: the pause token was lost"
    )


async def _populated(stores: Stores, key: ConversationKey) -> None:
    await populate(stores, key, OWNER, EPOCH)
    await stores.oauth.save_user_integration(
        UserIntegration(key.tenant, OWNER, SERVER, pending=_pending(), tokens={"a": 1})
    )
    await stores.oauth.save_client_info(ClientInfo(key.tenant, SERVER, {"id": "client"}))


class HostileInputContract(ContractBase):
    @promise("input.json_depth")
    def test_json_nested_too_deep_is_refused(self, backend: BackendUnderTest) -> None:
        """Every write that takes JSON refuses a value nested deeper than MAX_JSON_DEPTH
        (and one deep enough to exhaust Python's recursion limit) with UsageError, and
        keeps a value of exactly that depth intact."""
        key = self.key()

        async def body(stores: Stores) -> None:
            await _populated(stores, key)
            writes = json_writes(stores, key, await stores.now() + timedelta(hours=1))
            for what, write in writes.items():
                for depth in (MAX_JSON_DEPTH + 1, 100_000):
                    call = functools.partial(write, nested(depth))
                    await _refused(stores, key, call, f"{what}, depth {depth}")
            await _still_works(stores, key, "deep JSON")
            deepest = nested(MAX_JSON_DEPTH)
            inner = nested(MAX_JSON_DEPTH - 1)
            c = stores.conversations
            await c.append_messages(
                key, OWNER, [Message("deep", "user", deepest, metadata={"m": inner})]
            )
            stored = (await c.read_messages(key, OWNER, start=5))[0]
            assert stored.content == deepest and stored.metadata == {"m": inner}, (
                "content and metadata of exactly MAX_JSON_DEPTH did not round-trip"
            )
            await c.set_metadata(key, OWNER, {"m": deepest})
            info = await c.get_conversation(key, OWNER)
            assert info is not None and info.metadata["m"] == deepest, "conversation metadata"
            await stores.state.save(key, OWNER, {"s": inner})
            assert await stores.state.load(key, OWNER) == {"s": inner}, "state"
            assert await stores.recording.put(key, OWNER, RecordedEvent(9, deepest, "t", EPOCH))
            recorded = await stores.recording.read(key, OWNER)
            assert recorded is not None and recorded.message == deepest, "recording"
            later = await stores.now() + timedelta(hours=1)
            await stores.pause_tokens.put("deep", key, OWNER, deepest, later)
            assert await stores.pause_tokens.claim("deep", key, OWNER) == deepest, "payload"
            record = UserIntegration(key.tenant, OWNER, SERVER, tokens={"t": inner})
            await stores.oauth.save_user_integration(record)
            got = await stores.oauth.get_user_integration(key.tenant, OWNER, SERVER)
            assert got == record, "OAuth tokens of exactly MAX_JSON_DEPTH did not round-trip"

        self.run(backend, body)

    @promise("input.unicode")
    def test_lone_surrogates_are_refused(self, backend: BackendUnderTest) -> None:
        """A string holding a lone surrogate (no UTF-8 encoding exists for it) is a
        UsageError wherever a store takes a string: ids, titles, JSON keys and values,
        metadata names, OAuth fields."""
        key = self.key()
        lone = ("\ud800", "a\udfffb", "\U0001f600\ud83d")

        async def body(stores: Stores) -> None:
            await _populated(stores, key)
            later = await stores.now() + timedelta(hours=1)
            writes = json_writes(stores, key, later)
            for bad in lone:
                calls = text_writes(stores, key, bad, later)
                for what, write in writes.items():
                    calls[f"{what} value"] = functools.partial(write, bad)
                    calls[f"{what} key"] = functools.partial(write, {bad: 1})
                for what, call in calls.items():
                    await _refused(stores, key, call, f"{what} {bad!a}")
            await _still_works(stores, key, "lone surrogates")

        self.run(backend, body)

    @promise("input.times")
    def test_times_outside_utc_are_refused(self, backend: BackendUnderTest) -> None:
        """A datetime that is naive, or aware but past either end of the UTC range (so it
        would be written, then fail every read), is a UsageError wherever a store takes
        one; the ends of the range themselves are accepted."""
        key = self.key()
        hour = timedelta(hours=1)
        utc_max, utc_min = datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC)
        bad = {
            "after the UTC range": datetime.max.replace(tzinfo=timezone(-hour)),
            "before the UTC range": datetime.min.replace(tzinfo=timezone(hour)),
            "naive": datetime(2099, 1, 1),
        }

        async def body(stores: Stores) -> None:
            c, o = stores.conversations, stores.oauth
            await _populated(stores, key)
            for what, moment in bad.items():
                pending = dataclasses.replace(_pending(state="late"), expires_at=moment)
                calls: dict[str, Call] = {
                    "append(expires_at=)": functools.partial(
                        c.append_messages, key, OWNER, [], expires_at=moment
                    ),
                    "pause_tokens.put": functools.partial(
                        stores.pause_tokens.put, "late", key, OWNER, {}, moment
                    ),
                    "get_transcript(time_range=)": functools.partial(
                        c.get_transcript, key, OWNER, time_range=(utc_min, moment)
                    ),
                    "pending expires_at": functools.partial(
                        o.save_user_integration,
                        UserIntegration(key.tenant, OWNER, SERVER, pending=pending),
                    ),
                }
                for name, call in calls.items():
                    await _refused(stores, key, call, f"{name} {what}")
            await c.append_messages(key, OWNER, [], expires_at=utc_max)
            info = await c.get_conversation(key, OWNER)
            assert info is not None and info.expires_at == utc_max, "expires_at of datetime.max"
            everything = await c.get_transcript(key, OWNER, time_range=(utc_min, utc_max))
            assert len(everything) == 4, "a time range over all of UTC holds every message"
            await _still_works(stores, key, "times outside UTC")

        self.run(backend, body)

    @promise("input.cursor")
    def test_forged_cursors_are_refused(self, backend: BackendUnderTest) -> None:
        """A listing cursor this library did not make (numbers out of any store's range,
        a session id no key can have, deep, huge or not JSON at all) is a UsageError;
        the library's own cursors keep paging."""
        tenant = self.tenant()
        first, last = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
        forged = {
            "2**70 micros": _cursor([2**70, "s"]),
            "-2**70 micros": _cursor([-(2**70), "s"]),
            "2**63 micros": _cursor([2**63, "s"]),
            "after the last datetime": _cursor([to_micros(last) + 1, "s"]),
            "before the first datetime": _cursor([to_micros(first) - 1, "s"]),
            "a float": _cursor([1.5, "s"]),
            "a bool": _cursor([True, "s"]),
            "a lone surrogate": _cursor([0, "\ud800"]),
            "an empty session id": _cursor([0, ""]),
            "a NUL": _cursor([0, "a\x00b"]),
            "an over-long session id": _cursor([0, "s" * 1000]),
            "one item": _cursor([0]),
            "three items": _cursor([0, "s", 1]),
            "an object": _cursor({"u": 0, "s": "s"}),
            "deep": _cursor("[" * 100_000 + "]" * 100_000),
            "huge": _cursor([0, "s" * 10_000_000]),
            "not base64": "!!!",
            "not ASCII": "é",
            "a lone surrogate itself": "\ud800",
            "empty": "",
        }

        async def body(stores: Stores) -> None:
            c = stores.conversations
            for session in ("a", "b"):
                await c.append_messages(
                    ConversationKey(tenant, session), OWNER, [Message("m", "user", 1)]
                )
            for what, cursor in forged.items():
                await raises(
                    UsageError, c.list_conversations(tenant, OWNER, limit=1, cursor=cursor), what
                )
            first = await c.list_conversations(tenant, OWNER, limit=1)
            assert first.next_cursor is not None
            rest = await c.list_conversations(tenant, OWNER, limit=1, cursor=first.next_cursor)
            sessions = [i.key.session_id for i in first.items + rest.items]
            assert sorted(sessions) == ["a", "b"], f"paging after the refusals: {sessions}"
            edge = encode_cursor(to_micros(UNIX_EPOCH), "a")
            assert (await c.list_conversations(tenant, OWNER, cursor=edge)).items == [], (
                "a well-formed cursor before every conversation must give an empty page"
            )

        self.run(backend, body)

    @promise("input.sweep_rules")
    def test_bad_sweep_rules_are_refused(self, backend: BackendUnderTest) -> None:
        """``OverCap.keep`` must be an int from 0 to 2**63 - 1 and ``IdleFor.duration`` a
        positive timedelta of at most MAX_IDLE; anything else is a UsageError from
        ``find_sweepable`` and ``erase_if`` alike, and erases nothing. The bounds
        themselves are accepted (and sweep nothing here)."""
        key = self.key()
        bad: dict[str, Any] = {
            "OverCap(1.5)": OverCap(1.5),  # type: ignore[arg-type]
            "OverCap(True)": OverCap(True),
            "OverCap('3')": OverCap("3"),  # type: ignore[arg-type]
            "OverCap(-1)": OverCap(-1),
            "OverCap(2**63)": OverCap(2**63),
            "OverCap(2**70)": OverCap(2**70),
            "IdleFor(timedelta.max)": IdleFor(timedelta.max),
            "IdleFor(MAX_IDLE + 1 µs)": IdleFor(MAX_IDLE + timedelta(microseconds=1)),
            "IdleFor(0)": IdleFor(timedelta(0)),
            "IdleFor(-1 s)": IdleFor(timedelta(seconds=-1)),
            "IdleFor(60)": IdleFor(60),  # type: ignore[arg-type]
            "IdleFor(None)": IdleFor(None),  # type: ignore[arg-type]
        }

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await populate(stores, key, OWNER, EPOCH)
            for what, rule in bad.items():
                await raises(UsageError, c.find_sweepable(rule), f"find_sweepable {what}")
                await _refused(stores, key, functools.partial(c.erase_if, key, rule), what)
            for rule in (OverCap(MAX_COUNTER), IdleFor(MAX_IDLE)):
                assert key not in await c.find_sweepable(rule, limit=1000), f"{rule} found it"
                assert not await c.erase_if(key, rule), f"{rule} erased a fresh conversation"
            assert await c.get_conversation(key, OWNER) is not None
            assert key not in await c.find_sweepable(Expired(), limit=1000)

        self.run(backend, body)

    @promise("conversations.append.total_size")
    def test_one_append_is_capped_in_total(self, backend: BackendUnderTest) -> None:
        """The messages of one append carry at most MAX_APPEND_BYTES of encoded content
        and metadata together: one byte over is a UsageError and changes nothing;
        exactly the limit lands whole."""
        key = self.key()
        assert MAX_APPEND_BYTES % MAX_MESSAGE_BYTES == 0, "the test fills whole messages"
        full = MAX_APPEND_BYTES // MAX_MESSAGE_BYTES

        def batch(spare: int) -> list[Message]:
            # A message of content "x" * n costs n + 2 bytes of content, 2 of metadata "{}";
            # the last one, content 0, costs 3: the rest of its share goes to the first.
            sizes = [MAX_MESSAGE_BYTES] * full
            sizes[0] -= 3 - spare
            out = [Message(f"big{i}", "user", "x" * (n - 4)) for i, n in enumerate(sizes)]
            return [*out, Message("small", "assistant", 0)]

        async def body(stores: Stores) -> None:
            c = stores.conversations
            await populate(stores, key, OWNER, EPOCH)
            over = functools.partial(c.append_messages, key, OWNER, batch(1))
            await _refused(stores, key, over, "an append one byte over MAX_APPEND_BYTES")
            stored = await c.append_messages(key, OWNER, batch(0))
            assert [m.id for m in stored] == [*(f"big{i}" for i in range(full)), "small"], (
                "a batch of exactly MAX_APPEND_BYTES did not land whole"
            )
            back = await c.read_messages(key, OWNER, start=4)
            sizes = [len(json.dumps(m.content)) + len(json.dumps(dict(m.metadata))) for m in back]
            assert sum(sizes) == MAX_APPEND_BYTES, f"read back {sum(sizes)} bytes"
            # 64 MiB left behind slows every later test on some servers (nx-27017 took
            # 48 s instead of 2 s for the next append race): erase it.
            assert await c.delete(key, OWNER)

        self.run(backend, body)
