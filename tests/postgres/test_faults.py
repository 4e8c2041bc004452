"""Faults against a real server: backends terminated mid-call, responses lost after
commit, connection killers during races, an exhausted pool.

What must hold: a call that reports success took effect exactly once; a call that
reports failure took no effect; when the adapter cannot tell, it raises
UnknownOutcomeError (never a guessed success or failure); no double winner.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from agentstores.errors import (
    AlreadyClaimedError,
    BackendUnavailableError,
    StaleWriteError,
    UnknownOutcomeError,
)
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow, Swap, SwapOutcome
from agentstores_postgres.stores import PostgresStores
from tests.servers.netfault import NetFaultProxy
from tests.servers.relay import Relay

from .conftest import PgServer
from .faultproxy import FaultProxy

P = "owner"


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}")


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}@127.0.0.1:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@contextlib.asynccontextmanager
async def _stores(url: str, **options: object) -> AsyncIterator[PostgresStores]:
    options.setdefault("pool_min_size", 1)
    options.setdefault("pool_max_size", 1)
    options.setdefault("reconcile_timeout", 5)
    async with PostgresStores(url, **options) as stores:  # type: ignore[arg-type]
        yield stores


@contextlib.asynccontextmanager
async def _proxy(pg: PgServer) -> AsyncIterator[FaultProxy]:
    """A proxy to the server that can cut the next response on any connection (so a
    bundle behind it runs with push off: the listener's beat must not be what it cuts)."""
    parts = urlsplit(pg.url)
    proxy = await FaultProxy(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    try:
        yield proxy
    finally:
        await proxy.close()


@contextlib.asynccontextmanager
async def _row_locked(
    pg: PgServer, key: ConversationKey, table: str = "keys"
) -> AsyncIterator[asyncpg.Connection]:
    """Hold a row lock from an admin session so the adapter's call waits on it: the
    key's header for most writes, its supervision row for a CAS expecting a row (which
    takes no header lock)."""
    conn = await asyncpg.connect(pg.admin_url)
    tx = conn.transaction()
    await tx.start()
    try:
        locked = await conn.fetchval(
            f'SELECT 1 FROM "{pg.installation.schema}".{table} '
            "WHERE tenant = $1 AND session_id = $2 FOR UPDATE",
            key.tenant,
            key.session_id,
        )
        assert locked == 1
        yield conn
    finally:
        with contextlib.suppress(Exception):
            await tx.rollback()
        await conn.close()


async def _waiting_backend(admin: asyncpg.Connection, role: str) -> int:
    for _ in range(400):
        pid = await admin.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'",
            role,
        )
        if pid is not None:
            return int(pid)
        await asyncio.sleep(0.01)
    raise AssertionError("the adapter's call never waited on the row lock")


async def _kill_while_waiting(
    pg: PgServer, key: ConversationKey, call: object, table: str = "keys"
) -> object:
    """Start ``call`` (a coroutine) while a row it needs is locked, terminate the backend
    running it, release the lock; return the call's result or raise its error."""
    async with _row_locked(pg, key, table) as admin:
        task = asyncio.ensure_future(call)  # type: ignore[arg-type]
        pid = await _waiting_backend(admin, pg.installation.role)
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    return await task


# --- terminated mid-call: the write never committed ---------------------------------


async def test_takeover_cas_killed_mid_call_is_proven_unlanded_and_resent(pg: PgServer) -> None:
    key = _key()
    async with _stores(pg.url) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        took = await _kill_while_waiting(
            pg,
            key,
            sup.compare_and_swap(key, P, 1, SupervisionRow("running", "b", 2)),
            "supervision",
        )
        assert took is True
        row = (await sup.read(key, P)).row
        assert row is not None and (row.message_id, row.epoch) == ("b", 2)


async def test_heartbeat_killed_mid_call_is_unknown_not_guessed(pg: PgServer) -> None:
    key = _key()
    async with _stores(pg.url) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        before = (await sup.read(key, P)).row
        with pytest.raises(UnknownOutcomeError):
            await _kill_while_waiting(
                pg,
                key,
                sup.compare_and_swap(key, P, 1, SupervisionRow("running", "a", 1)),
                "supervision",
            )
        after = (await sup.read(key, P)).row
        assert after == before, "the killed heartbeat must not have landed"
        # The pool recovered: the next heartbeat goes through.
        assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "a", 1))


def _row(epoch: int) -> SupervisionRow:
    return SupervisionRow("running", "a", epoch)


async def _epochs(stores: PostgresStores, keys: list[ConversationKey]) -> list[int]:
    views = [await stores.supervision.read(k, P) for k in keys]
    return [v.row.epoch if v.row is not None else -1 for v in views]


async def test_takeover_batch_killed_mid_call_is_proven_unlanded_and_resent(
    pg: PgServer,
) -> None:
    """A batch of takeovers whose backend died waiting on a row lock never committed:
    every row is still at its expected epoch, which proves it, and the batch is sent
    again, each row then swapping once."""
    keys = [_key() for _ in range(3)]
    async with _stores(pg.url) as stores:
        sup = stores.supervision
        for k in keys:
            assert await sup.compare_and_swap(k, P, None, _row(1))
        batch = [Swap(k, P, 1, _row(2)) for k in keys]
        out = await _kill_while_waiting(
            pg, keys[0], sup.compare_and_swap_many(batch), "supervision"
        )
        assert out == [SwapOutcome(True)] * 3
        assert await _epochs(stores, keys) == [2, 2, 2]


async def test_batch_with_a_heartbeat_killed_mid_call_is_unknown_not_guessed(
    pg: PgServer,
) -> None:
    """A heartbeat leaves its row at the same epoch whether it landed or not, so a batch
    holding one cannot be proven unlanded: every row is UnknownOutcomeError, none a
    guessed success or failure, and nothing changed."""
    keys = [_key() for _ in range(3)]
    async with _stores(pg.url) as stores:
        sup = stores.supervision
        for k in keys:
            assert await sup.compare_and_swap(k, P, None, _row(1))
        before = [(await sup.read(k, P)).row for k in keys]
        batch = [Swap(keys[0], P, 1, _row(1)), Swap(keys[1], P, 1, _row(2))]
        batch.append(Swap(keys[2], P, 1, _row(2)))
        out = await _kill_while_waiting(
            pg, keys[0], sup.compare_and_swap_many(batch), "supervision"
        )
        assert isinstance(out, list) and len(out) == 3
        for outcome in out:
            assert not outcome.swapped
            assert isinstance(outcome.error, UnknownOutcomeError)
        assert [(await sup.read(k, P)).row for k in keys] == before
        # The pool recovered: the same batch goes through now.
        assert await sup.compare_and_swap_many(batch) == [SwapOutcome(True)] * 3


async def test_append_killed_mid_call_loses_nothing_and_duplicates_nothing(pg: PgServer) -> None:
    key = _key()
    async with _stores(pg.url) as stores:
        conv = stores.conversations
        await conv.append_messages(key, P, [Message("m0", "user", "hello")])
        batch = [Message("m1", "assistant", "hi"), Message("m2", "user", "again")]
        with pytest.raises(UnknownOutcomeError):
            await _kill_while_waiting(
                pg, key, conv.append_messages(key, P, batch, expected_tail="m0")
            )
        assert [m.id for m in await conv.read_messages(key, P)] == ["m0"]
        # Publication is idempotent: re-sending after an unknown outcome is safe.
        stored = await conv.append_messages(key, P, batch, expected_tail="m0")
        assert [m.seq for m in stored] == [1, 2]
        assert await conv.append_messages(key, P, batch) == []
        info = await conv.get_conversation(key, P)
        assert info is not None and (info.message_count, info.tail_message_id) == (3, "m2")


async def test_claim_killed_mid_call_is_resent_exactly_once(pg: PgServer) -> None:
    key = _key()
    async with _stores(pg.url) as stores:
        tokens = stores.pause_tokens
        expires = await stores.now() + timedelta(minutes=5)
        await tokens.put("tok", key, P, {"resume": 1}, expires)
        payload = await _kill_while_waiting(pg, key, tokens.claim("tok", key, P))
        assert payload == {"resume": 1}
        with pytest.raises(AlreadyClaimedError):
            await tokens.claim("tok", key, P)


# --- the response lost after commit: reconciled from the writer nonce ---------------


async def test_lost_responses_after_commit_are_reconciled(pg: PgServer) -> None:
    key = _key()
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        sup, conv = stores.supervision, stores.conversations
        # Each cut costs the pooled connection, and a new connection has an empty
        # statement cache: warm the call first so the cut hits its execution, not its
        # prepare (which would be an honest unknown outcome).
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "a", 1))
        proxy.cut_next_response()
        assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "a", 2))
        assert proxy.cut.is_set()
        row = (await sup.read(key, P)).row
        assert row is not None and row.epoch == 2

        await conv.append_messages(key, P, [Message("w", "user", "warm")])
        proxy.cut_next_response()
        stored = await conv.append_messages(
            key, P, [Message("x", "assistant", "one"), Message("y", "user", "two")]
        )
        assert proxy.cut.is_set()
        assert [(m.id, m.seq) for m in stored] == [("x", 1), ("y", 2)]
        assert [m.id for m in await conv.read_messages(key, P)] == ["w", "x", "y"]

        await stores.state.save(key, P, {"n": 0})
        proxy.cut_next_response()
        await stores.state.save(key, P, {"n": 1}, epoch=2)
        assert proxy.cut.is_set()
        assert await stores.state.load(key, P) == {"n": 1}

        expires = await stores.now() + timedelta(minutes=5)
        await stores.pause_tokens.put("t0", key, P, "zero", expires)
        await stores.pause_tokens.put("t1", key, P, "one", expires)
        assert await stores.pause_tokens.claim("t0", key, P) == "zero"
        proxy.cut_next_response()
        assert await stores.pause_tokens.claim("t1", key, P) == "one"
        assert proxy.cut.is_set()
        with pytest.raises(AlreadyClaimedError):
            await stores.pause_tokens.claim("t1", key, P)


async def test_lost_response_of_a_committed_batch_is_reconciled_per_row(pg: PgServer) -> None:
    """The batch committed and its response was lost: the rows holding the batch's nonce
    swapped; the row that lost its compare (a stale expectation) is never reported as a
    success."""
    keys = [_key() for _ in range(3)]
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        sup = stores.supervision
        for k in keys:
            assert await sup.compare_and_swap(k, P, None, _row(1))
        # warm the statement, so the cut hits its execution and not its prepare
        assert (
            await sup.compare_and_swap_many([Swap(k, P, 1, _row(1)) for k in keys])
            == [SwapOutcome(True)] * 3
        )
        batch = [Swap(keys[0], P, 1, _row(1)), Swap(keys[1], P, 1, _row(2))]
        batch.append(Swap(keys[2], P, 5, _row(6)))
        proxy.cut_next_response()
        out = await sup.compare_and_swap_many(batch)
        assert proxy.cut.is_set()
        assert out[:2] == [SwapOutcome(True), SwapOutcome(True)]
        assert not out[2].swapped
        assert out[2].error is None or isinstance(out[2].error, UnknownOutcomeError)
        assert await _epochs(stores, keys) == [1, 2, 1]


async def test_lost_response_of_an_uncheckable_write_is_unknown(pg: PgServer) -> None:
    key = _key()
    async with _proxy(pg) as proxy, _stores(_through(pg.url, proxy.port), push=False) as stores:
        conv = stores.conversations
        await conv.append_messages(key, P, [Message(f"m{i}", "user", i) for i in range(4)])
        await conv.truncate(key, P, "m3")  # warm
        proxy.cut_next_response()
        with pytest.raises(UnknownOutcomeError, match="cannot be checked"):
            await conv.truncate(key, P, "m2")
        assert proxy.cut.is_set()
        # It did land (the response was lost after commit); the adapter did not claim so.
        assert [m.id for m in await conv.read_messages(key, P)] == ["m0", "m1"]


# --- races with a connection killer -------------------------------------------------


async def _killer(pg: PgServer, stop: asyncio.Event, rng: random.Random) -> int:
    conn = await asyncpg.connect(pg.admin_url)
    killed = 0
    try:
        while not stop.is_set():
            killed += await conn.fetchval(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE usename = $1 AND state = 'active'",
                pg.installation.role,
            )
            await asyncio.sleep(rng.uniform(0.0, 0.01))
    finally:
        await conn.close()
    return killed


async def _race(
    pg: PgServer,
    key: ConversationKey,
    racers: int,
    attempt: object,
    rng: random.Random,
    table: str = "keys",
) -> tuple[list[object], int]:
    """Race the attempts while backends die: all racers first queue on a row lock
    (held by an admin), a random subset of them is terminated there, then the lock
    is released and a killer keeps terminating the role's active backends for a moment.
    Returns the racers' results (or errors) and how many backends were killed."""
    stop = asyncio.Event()
    async with _row_locked(pg, key, table) as admin:
        tasks = [asyncio.ensure_future(attempt(i)) for i in range(racers)]  # type: ignore[operator]
        for _ in range(500):
            waiting = await admin.fetch(
                "SELECT pid FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'",
                pg.installation.role,
            )
            if len(waiting) == racers:
                break
            await asyncio.sleep(0.01)
        victims = rng.sample([r["pid"] for r in waiting], rng.randint(1, len(waiting) - 1))
        killed = sum([await admin.fetchval("SELECT pg_terminate_backend($1)", v) for v in victims])
        killer = asyncio.create_task(_killer(pg, stop, rng))
    await asyncio.sleep(rng.uniform(0.0, 0.03))
    stop.set()
    killed += await killer
    return list(await asyncio.gather(*tasks, return_exceptions=True)), killed


async def test_cas_races_under_a_killer_have_no_double_winner(pg: PgServer) -> None:
    rng = random.Random(7)
    racers = 6
    outcomes = {"win": 0, "lose": 0, "unknown": 0, "killed": 0}
    bundles = [PostgresStores(pg.url, pool_max_size=1, reconcile_timeout=5) for _ in range(racers)]
    for b in bundles:
        await b.open()
    try:
        for _ in range(12):
            key = _key()
            first = SupervisionRow("running", "start", 1)
            assert await bundles[0].supervision.compare_and_swap(key, P, None, first)

            async def attempt(i: int, key: ConversationKey = key) -> bool:
                row = SupervisionRow("running", f"r{i}", 2)
                return await bundles[i].supervision.compare_and_swap(key, P, 1, row)

            results, killed = await _race(pg, key, racers, attempt, rng, "supervision")
            outcomes["killed"] += killed
            for r in results:
                if not (r is True or r is False or isinstance(r, UnknownOutcomeError)):
                    raise r  # type: ignore[misc]
            winners = [i for i, r in enumerate(results) if r is True]
            unknown = {i for i, r in enumerate(results) if isinstance(r, UnknownOutcomeError)}
            assert len(winners) <= 1, f"double winner: {winners}"
            row = (await bundles[0].supervision.read(key, P)).row
            assert row is not None
            if winners:
                assert (row.message_id, row.epoch) == (f"r{winners[0]}", 2)
            elif row.epoch == 2:
                assert int(row.message_id[1:]) in unknown, "a reported loser's write landed"
            else:
                assert row.message_id == "start"
            outcomes["win"] += len(winners)
            outcomes["lose"] += sum(r is False for r in results)
            outcomes["unknown"] += len(unknown)
    finally:
        for b in bundles:
            await b.close()
    assert outcomes["win"] > 0 and outcomes["lose"] > 0 and outcomes["killed"] > 0


async def test_append_races_under_a_killer_lose_nothing(pg: PgServer) -> None:
    rng = random.Random(11)
    racers = 6
    bundles = [PostgresStores(pg.url, pool_max_size=1, reconcile_timeout=5) for _ in range(racers)]
    for b in bundles:
        await b.open()
    key = _key()
    conv = bundles[0].conversations
    try:
        await conv.append_messages(key, P, [Message("root", "user", 0)])
        acknowledged: list[str] = []
        refused: list[str] = []
        killed = 0
        for rnd in range(12):
            tail = (await conv.get_conversation(key, P)).tail_message_id  # type: ignore[union-attr]

            async def attempt(i: int, tail: str | None = tail, rnd: int = rnd) -> object:
                mid = f"r{rnd}-{i}"
                return await bundles[i].conversations.append_messages(
                    key, P, [Message(mid, "assistant", mid)], expected_tail=tail
                )

            results, k = await _race(pg, key, racers, attempt, rng)
            killed += k
            winners = [i for i, r in enumerate(results) if isinstance(r, list) and r]
            assert len(winners) <= 1, f"two appends on one tail both won: {winners}"
            for i, r in enumerate(results):
                mid = f"r{rnd}-{i}"
                if isinstance(r, list):
                    acknowledged.append(mid)
                elif isinstance(r, (StaleWriteError, BackendUnavailableError)) and not isinstance(
                    r, UnknownOutcomeError
                ):
                    refused.append(mid)
                else:
                    if not isinstance(r, UnknownOutcomeError):
                        raise r
        ids = [m.id for m in await conv.read_messages(key, P)]
        assert len(ids) == len(set(ids))
        assert set(acknowledged) <= set(ids), "an acknowledged append is missing"
        assert not set(refused) & set(ids), "a refused append landed"
        assert acknowledged, "no append ever won"
        assert killed > 0, "the killer never hit a call"
    finally:
        for b in bundles:
            await b.close()


# --- the pool ------------------------------------------------------------------------


async def test_pool_exhaustion_waits_then_says_so(pg: PgServer) -> None:
    key = _key()
    async with _stores(pg.url, acquire_timeout=0.3) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        async with _row_locked(pg, key, "supervision") as admin:
            busy = asyncio.ensure_future(
                sup.compare_and_swap(key, P, 1, SupervisionRow("running", "a", 2))
            )
            await _waiting_backend(admin, pg.installation.role)
            with pytest.raises(BackendUnavailableError, match="pool exhausted") as info:
                await sup.read(key, P)
            assert "all 1 pooled connections stayed busy" in str(info.value)
            assert not isinstance(info.value, UnknownOutcomeError)
        assert await busy is True
        assert (await sup.read(key, P)).row.epoch == 2  # type: ignore[union-attr]


async def test_calls_waiting_on_a_full_pool_are_served_not_starved(pg: PgServer) -> None:
    """More concurrent callers than pooled connections: a connection a finished call
    leaves clean goes to a caller already waiting, not only to callers arriving later,
    so every caller is served (none times out while others keep the connections)."""
    key = _key()
    callers, reads = 12, 20
    async with _stores(pg.url, pool_max_size=2, acquire_timeout=2.0) as stores:

        async def reader() -> int:
            for _ in range(reads):
                await stores.supervision.read(key, P)
            return reads

        assert await asyncio.gather(*(reader() for _ in range(callers))) == [reads] * callers


async def test_a_full_pool_serves_callers_in_arrival_order(pg: PgServer) -> None:
    """Callers waiting for a full pool are served first come, first served: between the
    moment a caller asks and the moment it is served, each other caller is served at most
    once (a caller that asks again joins the back). Waiting on asyncpg's queue, a caller
    woken for a connection could find it taken by a later arrival and wait again: the
    tail of a busy pool's latency."""
    callers, rounds = 6, 30
    served, worst = 0, 0
    async with _stores(pg.url, pool_max_size=1, acquire_timeout=10.0) as stores:

        async def caller() -> None:
            nonlocal served, worst
            for _ in range(rounds):
                asked = served
                async with stores.db.connection() as conn:
                    worst = max(worst, served - asked)
                    served += 1
                    await conn.fetchval("SELECT 1")

        await asyncio.gather(*(caller() for _ in range(callers)))
    assert served == callers * rounds
    assert worst <= callers - 1, f"a caller waited while {worst} others were served"


async def test_unreachable_server_is_backend_unavailable() -> None:
    from tests.servers.postgres import free_port

    stores = PostgresStores(f"postgresql://nobody@127.0.0.1:{free_port()}/db", acquire_timeout=0.5)
    with pytest.raises(BackendUnavailableError):
        await stores.open()


class _LoseSchemaCheck(Relay):
    """Drops the reply to the schema check ``open()`` runs, closing its connection."""

    def request(self, data: bytes, marks: list[Any]) -> bool:
        if b"SELECT version, fingerprint" in data:
            marks.append("check")
        return True

    async def reply(self, data: bytes, mark: Any | None) -> bool:
        return mark != "check"


async def test_a_connection_lost_while_opening_is_backend_unavailable(pg: PgServer) -> None:
    """The connection breaking during open()'s schema check is a typed
    BackendUnavailableError, as a failed connect is (the network-fault run saw asyncpg's
    ConnectionDoesNotExistError escape open_stores)."""
    parts = urlsplit(pg.url)
    relay = await _LoseSchemaCheck("127.0.0.1", parts.port or 5432).start()
    try:
        stores = PostgresStores(_through(pg.url, relay.port), push=False, acquire_timeout=2)
        with pytest.raises(BackendUnavailableError):
            await stores.open()
    finally:
        await relay.close()


async def test_a_blackholed_server_ends_the_call_as_unknown_with_command_timeout(
    pg: PgServer,
) -> None:
    """A call whose bytes vanish (a server or middlebox that keeps the connection open
    and answers nothing) ends by ``command_timeout`` as UnknownOutcomeError once the
    reconciliation gives up, and the bundle works again once the network heals. (Unset,
    the default, nothing bounds the wait: see docs/netfaults.md.)"""
    parts = urlsplit(pg.url)
    proxy = await NetFaultProxy("127.0.0.1", parts.port or 5432).start()
    k = _key()
    try:
        async with _stores(
            _through(pg.url, proxy.port),
            command_timeout=1,
            reconcile_timeout=2,
            pool_max_size=2,
            push=False,
        ) as s:
            await s.conversations.append_messages(k, "p", [Message("m0", "user", 0)])
            proxy.blackhole()
            with pytest.raises(UnknownOutcomeError):
                await asyncio.wait_for(  # a hang detector, not a timing check
                    s.conversations.append_messages(k, "p", [Message("m1", "user", 1)]), 60
                )
            proxy.heal()
            assert [m.id for m in await s.conversations.read_messages(k, "p")] == ["m0"]
    finally:
        await proxy.close()
