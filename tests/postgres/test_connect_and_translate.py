"""Opening against servers that do not let us in, values the server refuses, and the
bytes the OAuth store writes.

What must hold: when nothing listens at the address, opening gives up after the short
unanswered window, not after the whole ``acquire_timeout``; a server that answers but is
full is waited for past that window, and opening succeeds once it lets us in; a server
that refuses for a reason time does not cure (no such database, no such role) fails the
open at once, asked once. A value the database cannot hold is a UsageError and changes
nothing. The OAuth blobs are stored as compact, sorted JSON, byte for byte. A spent pause
token's refusal names its status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from agentstores.errors import AlreadyClaimedError, BackendUnavailableError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import ClientInfo, Message, PendingAuthorization, UserIntegration
from agentstores_postgres import database
from agentstores_postgres.stores import PostgresStores
from agentstores_postgres.urls import parse_url
from tests.servers.postgres import Installation, with_user
from tests.servers.process import free_port
from tests.servers.relay import Relay

from .conftest import PgServer

P = "owner"
WINDOW = 0.2
"""The unanswered window these tests give ``open`` (the shipped one is 3 s), so that
going past it takes a moment."""
LONG = 600.0
"""An ``acquire_timeout`` no test waits for: reaching it is the failure."""


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}")


def _replace(url: str, *, port: int | None = None, dbname: str | None = None) -> str:
    """``url`` through 127.0.0.1:``port`` and/or naming another database."""
    parts = urlsplit(url)
    netloc = parts.netloc if port is None else f"{parts.netloc.rpartition('@')[0]}@127.0.0.1:{port}"
    path = parts.path if dbname is None else f"/{dbname}"
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


class _CountingRelay(Relay):
    """Forwards everything and counts the connections made through it."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self._seen: list[list[Any]] = []

    @property
    def connections(self) -> int:
        return len(self._seen)

    def request(self, data: bytes, marks: list[Any]) -> bool:
        if not any(seen is marks for seen in self._seen):  # one marks list per connection
            self._seen.append(marks)
        return True


@contextlib.asynccontextmanager
async def _latin1_installation(pg: PgServer) -> AsyncIterator[Installation]:
    """A database in LATIN1 (a legacy encoding) with the schema installed in it."""
    name = f"as_latin1_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(pg.admin_url)
    try:
        await admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'LATIN1' "
            "LC_COLLATE 'C' LC_CTYPE 'C'"
        )
        try:
            async with Installation(_replace(pg.admin_url, dbname=name)) as inst:
                yield inst
        finally:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await admin.close()


# --- opening ------------------------------------------------------------------------


async def test_nothing_listening_gives_up_after_the_unanswered_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A refused TCP connect (a wrong host or port) fails the open once the unanswered
    window has passed, not after ``acquire_timeout``: a misconfigured address is reported
    fast even with a generous timeout for a busy pool."""
    monkeypatch.setattr(database, "OPEN_UNANSWERED_WINDOW", WINDOW)
    stores = PostgresStores(
        f"postgresql://nobody@127.0.0.1:{free_port()}/db", acquire_timeout=LONG, push=False
    )
    with pytest.raises(BackendUnavailableError):
        # a bound far above the window and far below acquire_timeout, not a timing check
        await asyncio.wait_for(stores.open(), 10)


async def test_a_full_server_is_waited_for_past_the_unanswered_window(
    pg: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers "too many connections" (53300) is there, only full: opening
    keeps trying past the unanswered window and succeeds once a connection is allowed."""
    monkeypatch.setattr(database, "OPEN_UNANSWERED_WINDOW", WINDOW)
    role = pg.installation.role
    admin = await asyncpg.connect(pg.admin_url)
    try:
        await admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 0')
        with pytest.raises(asyncpg.TooManyConnectionsError):  # the server does refuse
            await (await asyncpg.connect(with_user(pg.admin_url, role))).close()
        stores = PostgresStores(pg.url, acquire_timeout=LONG, push=False)
        opening = asyncio.ensure_future(stores.open())
        try:
            await asyncio.sleep(5 * WINDOW)
            assert not opening.done(), "open gave up on a full server"
            await admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
            await asyncio.wait_for(opening, 30)  # a hang detector
            key = _key()
            await stores.state.save(key, P, {"n": 1})
            assert await stores.state.load(key, P) == {"n": 1}
        finally:
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            await stores.close()
    finally:
        await admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
        await admin.close()


@pytest.mark.parametrize("missing", ["database", "role"])
async def test_a_refusal_time_does_not_cure_fails_the_open_at_once(
    pg: PgServer, missing: str
) -> None:
    """A server answering that the database (3D000) or the role (28000) does not exist
    is asked once: BackendUnavailableError naming it, with no retries until
    ``acquire_timeout``."""
    name = f"as_missing_{uuid.uuid4().hex[:8]}"
    parts = urlsplit(pg.url)
    relay = await _CountingRelay(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    try:
        url = _replace(pg.url, port=relay.port)
        url = _replace(url, dbname=name) if missing == "database" else with_user(url, name)
        # what one attempt costs here (sslmode=prefer may try with TLS, then without)
        with pytest.raises(asyncpg.PostgresError):
            await asyncpg.connect(parse_url(url).dsn)
        one_attempt = relay.connections
        stores = PostgresStores(url, acquire_timeout=2, push=False)
        with pytest.raises(BackendUnavailableError) as refused:
            await stores.open()
        assert name in str(refused.value)
        assert relay.connections == 2 * one_attempt, "the refusal was asked again"
    finally:
        await relay.close()


# --- values the server refuses ------------------------------------------------------


async def test_text_the_database_encoding_cannot_hold_is_a_usage_error_and_changes_nothing(
    pg: PgServer,
) -> None:
    """In a LATIN1 database, text outside Latin-1 (a snowman in a title or a message id)
    is refused by the server (SQLSTATE 22P05): a UsageError, the conversation as it was,
    and the bundle keeps working."""
    key = _key()
    async with (
        _latin1_installation(pg) as inst,
        PostgresStores(inst.url, pool_max_size=1, push=False) as stores,
    ):
        conv = stores.conversations
        await conv.append_messages(key, P, [Message("m0", "user", "hi")], title="café")
        with pytest.raises(UsageError, match="refused a value"):
            await conv.set_title(key, P, "snow \u2603")
        with pytest.raises(UsageError, match="refused a value"):
            await conv.append_messages(key, P, [Message("\u2603", "user", "x")])
        info = await conv.get_conversation(key, P)
        assert info is not None and info.title == "café"
        assert [m.id for m in await conv.read_messages(key, P)] == ["m0"]
        await conv.append_messages(key, P, [Message("m1", "assistant", "ok")])
        assert [m.id for m in await conv.read_messages(key, P)] == ["m0", "m1"]


# --- the OAuth store's bytes --------------------------------------------------------


async def test_oauth_blobs_are_stored_as_compact_sorted_json(pg: PgServer) -> None:
    """The bytea columns hold compact JSON with sorted keys and raw UTF-8, byte for byte:
    the stored format, which every version of the adapter reads and writes, and which a
    lost reply's reconciliation compares with what it encodes afresh."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    expires = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    pending = PendingAuthorization("st-1", "https://a/x", "v", "https://a/t", "https://r", expires)
    tokens = {"z": [1, 2], "a": {"é": True}}
    async with PostgresStores(pg.url, push=False) as stores:
        record = UserIntegration(tenant, "u", "srv", pending, tokens)
        await stores.oauth.save_user_integration(record)
        await stores.oauth.save_client_info(ClientInfo(tenant, "srv", {"id": "c", "b": None}))
    admin = await asyncpg.connect(pg.admin_url)
    try:
        s = pg.installation.schema
        row = await admin.fetchrow(
            f'SELECT pending, tokens FROM "{s}".oauth_integrations WHERE tenant = $1', tenant
        )
        client = await admin.fetchval(
            f'SELECT client_info FROM "{s}".oauth_clients WHERE tenant = $1', tenant
        )
    finally:
        await admin.close()
    assert bytes(row["tokens"]) == '{"a":{"é":true},"z":[1,2]}'.encode()
    assert bytes(client) == b'{"b":null,"id":"c"}'
    assert bytes(row["pending"]) == (
        b'{"auth_url":"https://a/x","code_verifier":"v","expires_at":"2030-01-02T03:04:05+00:00",'
        b'"redirect_uri":"https://r","resource":null,"state":"st-1","token_endpoint":"https://a/t"}'
    )
    assert json.loads(row["pending"]) == pending.to_json()


# --- a refusal's detail ---------------------------------------------------------------


@pytest.mark.parametrize("first", ["claim", "abandon"])
async def test_a_spent_pause_tokens_refusal_names_its_status(pg: PgServer, first: str) -> None:
    """Claiming a token already claimed or abandoned raises AlreadyClaimedError whose
    context names the token's status, as the server sent it back (a caller tells a
    double submit from a cancelled pause without parsing the message)."""
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")
    async with PostgresStores(pg.url, push=False) as stores:
        await stores.conversations.append_messages(key, "p", [Message("m0", "user", "hi")])
        expires = datetime.now(UTC) + timedelta(minutes=5)
        await stores.pause_tokens.put("tok", key, "p", {"ask": 1}, expires)
        await getattr(stores.pause_tokens, first)("tok", key, "p")
        with pytest.raises(AlreadyClaimedError) as refused:
            await stores.pause_tokens.claim("tok", key, "p")
        status = {"claim": "claimed", "abandon": "abandoned"}[first]
        assert refused.value.context.get("status") == status, refused.value.context
        assert refused.value.key == key


# --- timeouts in the URL ----------------------------------------------------------------


def test_timeouts_take_any_positive_number_of_seconds() -> None:
    """``acquire_timeout`` and ``reconcile_timeout`` take any positive number of seconds,
    fractions under one included; zero or less is refused by name."""
    base = "postgresql://u@127.0.0.1:5432/db"
    for option in ("acquire_timeout", "reconcile_timeout"):
        for seconds in ("0.25", "1", "30"):
            config = parse_url(f"{base}?{option}={seconds}")
            assert getattr(config, option) == float(seconds), (option, seconds)
        for seconds in ("0", "-1"):
            with pytest.raises(UsageError, match="timeout"):
                parse_url(f"{base}?{option}={seconds}")
