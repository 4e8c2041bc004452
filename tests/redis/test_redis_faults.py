"""Faults: replies lost after the server ran a write, connections killed mid-call, the
pool exhausted, the server crashing and restarting with the AOF on, WAIT/WAITAOF.

Outcomes are checked against the data, never against the clock: a write whose reply was
lost is either reconciled to its true result or raised as UnknownOutcomeError; a call
refused before it was sent raises BackendUnavailableError and changes nothing.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from agentstores import (
    AlreadyClaimedError,
    BackendUnavailableError,
    ConversationKey,
    Message,
    RecordedEvent,
    SupervisionRow,
    Swap,
    SwapOutcome,
    UnknownOutcomeError,
    UnsupportedError,
)
from agentstores.stores import Capability
from agentstores_redis.stores import RedisStores
from tests.servers.netfault import NetFaultProxy
from tests.servers.relay import Relay as BaseRelay
from tests.servers.valkey import ValkeyCluster, ValkeyServer, redis_version
from tests.servers.variants import not_run

from .conftest import MACHINE_BINARY, with_prefix
from .helpers import Admin, Relay, host_port


def key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


def row(epoch: int, mid: str = "m") -> SupervisionRow:
    return SupervisionRow("running", mid, epoch)


# --- a reply lost after the server ran the write: reconciled -----------------------


@dataclass
class Case:
    setup: Callable[[RedisStores, ConversationKey], Awaitable[Any]]
    call: Callable[[RedisStores, ConversationKey], Awaitable[Any]]
    check: Callable[[RedisStores, ConversationKey, Any], Awaitable[None]]
    skip_replies: int = 0


async def _nothing(s: RedisStores, k: ConversationKey) -> None:
    return None


async def _conv(s: RedisStores, k: ConversationKey) -> None:
    await s.conversations.append_messages(
        k, "p", [Message("u1", "user", "q"), Message("a1", "assistant", "r")]
    )


async def _check_cas(s: RedisStores, k: ConversationKey, result: Any) -> None:
    assert result is True
    view = await s.supervision.read(k, "p")
    assert view.row is not None and view.row.epoch == 1


async def _check_put(s: RedisStores, k: ConversationKey, result: Any) -> None:
    assert result is True
    assert await s.recording.read(k, "p") == RecordedEvent(2, {"x": 1}, "m", 1)


async def _check_save(s: RedisStores, k: ConversationKey, result: Any) -> None:
    assert result is None
    assert await s.state.load(k, "p") == {"v": 1}


async def _check_append(s: RedisStores, k: ConversationKey, result: Any) -> None:
    assert [(m.id, m.seq) for m in result] == [("x1", 0), ("x2", 1)]
    assert [m.id for m in await s.conversations.read_messages(k, "p")] == ["x1", "x2"]
    again = await s.conversations.append_messages(
        k, "p", [Message("x1", "user", 1), Message("x2", "assistant", 2)]
    )
    assert again == [], "the reconciled append must not be applied twice"


async def _check_truncate(s: RedisStores, k: ConversationKey, result: Any) -> None:
    assert result == 2
    assert await s.conversations.read_messages(k, "p") == []


async def _check_delete(s: RedisStores, k: ConversationKey, result: Any) -> None:
    assert result is True
    assert await s.conversations.get_conversation(k, "p") is None


async def _check_claim(s: RedisStores, k: ConversationKey, result: Any) -> None:
    assert result == {"resume": 1}, "the single-use payload must survive a lost reply"
    with pytest.raises(AlreadyClaimedError):
        await s.pause_tokens.claim("tok", k, "p")


async def _token(s: RedisStores, k: ConversationKey) -> None:
    await s.pause_tokens.put("tok", k, "p", {"resume": 1}, await s.now() + timedelta(hours=1))


async def _check_branch(s: RedisStores, k: ConversationKey, result: Any) -> None:
    assert [m.role for m in await s.conversations.read_messages(result, "p")] == ["user"]


CASES = {
    "cas": Case(
        _nothing, lambda s, k: s.supervision.compare_and_swap(k, "p", None, row(1)), _check_cas
    ),
    "recording.put": Case(
        _nothing,
        lambda s, k: s.recording.put(k, "p", RecordedEvent(2, {"x": 1}, "m", 1)),
        _check_put,
    ),
    "state.save": Case(_nothing, lambda s, k: s.state.save(k, "p", {"v": 1}, epoch=1), _check_save),
    "append": Case(
        _nothing,
        lambda s, k: s.conversations.append_messages(
            k, "p", [Message("x1", "user", 1), Message("x2", "assistant", 2)]
        ),
        _check_append,
    ),
    "truncate": Case(_conv, lambda s, k: s.conversations.truncate(k, "p", "u1"), _check_truncate),
    "delete": Case(_conv, lambda s, k: s.conversations.delete(k, "p"), _check_delete),
    "claim": Case(_token, lambda s, k: s.pause_tokens.claim("tok", k, "p"), _check_claim),
    "branch": Case(
        _conv,
        lambda s, k: s.conversations.branch(k, "p", "u1"),
        _check_branch,
        skip_replies=1,  # the branch first reads its source; lose the write's reply
    ),
}


@pytest.fixture
async def relay(valkey_server: ValkeyServer) -> Any:
    r = await Relay(valkey_server.port).start()
    yield r
    await r.close()


@pytest.mark.parametrize("name", sorted(CASES))
async def test_lost_reply_is_reconciled(name: str, relay: Relay) -> None:
    case = CASES[name]
    k = key()
    async with RedisStores(relay.url(f"astest-{uuid.uuid4().hex[:8]}"), pool_size=4) as s:
        await case.setup(s, k)
        relay.lose_next_reply(skip=case.skip_replies)
        before = s.ctx.reconciled
        result = await case.call(s, k)
        assert relay.cut == 1, "the relay did not cut the connection"
        assert s.ctx.reconciled == before + 1, "the outcome was not reconciled"
        await case.check(s, k, result)
        await s.purge()


async def test_a_lost_reply_to_a_claim_another_bundle_won_is_no_success(
    relay: Relay, valkey_server: ValkeyServer
) -> None:
    """The claim reached the server and was refused (another bundle had claimed the
    token), then its reply was lost: the token reads claimed, but by another claim, so
    the reconciliation must not take it for this one's (two winners of one token)."""
    k, prefix = key(), f"astest-{uuid.uuid4().hex[:8]}"
    async with (
        RedisStores(relay.url(prefix), pool_size=4) as s,
        RedisStores(with_prefix(valkey_server.url, prefix)) as other,
    ):
        await _token(s, k)
        assert await other.pause_tokens.claim("tok", k, "p") == {"resume": 1}
        relay.lose_next_reply()
        with pytest.raises((UnknownOutcomeError, AlreadyClaimedError)):
            await s.pause_tokens.claim("tok", k, "p")
        assert relay.cut == 1, "the relay did not cut the connection"
        await s.purge()


async def test_request_lost_before_the_server_is_unknown(relay: Relay) -> None:
    """A write that never reached the server leaves no evidence: UnknownOutcomeError,
    never a guessed True or False, and nothing changed."""
    k = key()
    async with RedisStores(relay.url(f"astest-{uuid.uuid4().hex[:8]}"), pool_size=4) as s:
        assert await s.supervision.compare_and_swap(k, "p", None, row(1))
        relay.lose_next_request()
        with pytest.raises(UnknownOutcomeError):
            await s.supervision.compare_and_swap(k, "p", 1, row(2))
        view = await s.supervision.read(k, "p")
        assert view.row is not None and view.row.epoch == 1
        await s.purge()


class _LoseScriptLoad(BaseRelay):
    """Drops the reply to the SCRIPT LOAD a bundle sends while opening."""

    def request(self, data: bytes, marks: list[Any]) -> bool:
        if b"SCRIPT" in data:
            marks.append("load")
        return True

    async def reply(self, data: bytes, mark: Any | None) -> bool:
        return mark != "load"


async def test_a_connection_lost_while_opening_is_backend_unavailable(
    valkey_server: ValkeyServer,
) -> None:
    """A connection lost while the bundle loads its scripts is BackendUnavailableError,
    never the client's internal exception (the network-fault run saw it escape
    open_stores)."""
    relay = await _LoseScriptLoad("127.0.0.1", valkey_server.port).start()
    try:
        with pytest.raises(BackendUnavailableError):
            async with RedisStores(with_prefix(f"redis://127.0.0.1:{relay.port}/0"), push=False):
                pass
    finally:
        await relay.close()


async def test_a_blackholed_server_ends_the_call_as_unknown(valkey_server: ValkeyServer) -> None:
    """A server that swallows every byte and never closes (a blackhole) must not hold a
    call forever: the write's reply times out, and the reconciling read's new connection,
    whose handshake is swallowed too, times out as well. The write raises
    UnknownOutcomeError and, the network healed, the bundle works again."""
    proxy = await NetFaultProxy("127.0.0.1", valkey_server.port).start()
    url = with_prefix(f"redis://127.0.0.1:{proxy.port}/0?socket_timeout=1&connect_timeout=1")
    k = key()
    try:
        async with RedisStores(url, pool_size=4, reconnect_window=0.5) as s:
            await s.conversations.append_messages(k, "p", [Message("m0", "user", 0)])
            proxy.blackhole()
            # a hang detector, not a timing check: the bounds add up to a few seconds
            with pytest.raises(UnknownOutcomeError):
                await asyncio.wait_for(
                    s.conversations.append_messages(k, "p", [Message("m1", "user", 1)]), 60
                )
            proxy.heal()
            ids = [m.id for m in await s.conversations.read_messages(k, "p")]
            assert ids == ["m0"], "a swallowed request cannot have landed"
            await s.purge()
    finally:
        await proxy.close()


# --- a batch of swaps (heartbeats) whose pipeline lost its reply or its request -----


def _batch(keys: list[ConversationKey]) -> list[Swap]:
    """A heartbeat, a takeover and a swap on a stale expectation (which must lose)."""
    return [
        Swap(keys[0], "p", 1, row(1)),
        Swap(keys[1], "p", 1, row(2)),
        Swap(keys[2], "p", 5, row(6)),
    ]


async def _epochs(s: RedisStores, keys: list[ConversationKey]) -> list[int]:
    views = [await s.supervision.read(k, "p") for k in keys]
    return [v.row.epoch if v.row is not None else -1 for v in views]


async def test_lost_reply_of_a_swap_batch_is_reconciled_per_row(relay: Relay) -> None:
    """The pipeline ran on the server, its replies never arrived: each row that swapped
    is proven so by its own nonce; the row that lost has no nonce to show, so it is
    reported unknown (or lost), never as a success."""
    keys = [key() for _ in range(3)]
    async with RedisStores(relay.url(f"astest-{uuid.uuid4().hex[:8]}"), pool_size=4) as s:
        for k in keys:
            assert await s.supervision.compare_and_swap(k, "p", None, row(1))
        before = s.ctx.reconciled
        relay.lose_next_reply()
        out = await s.supervision.compare_and_swap_many(_batch(keys))
        assert relay.cut == 1, "the relay did not cut the connection"
        assert out[:2] == [SwapOutcome(True), SwapOutcome(True)]
        assert s.ctx.reconciled == before + 2
        assert not out[2].swapped
        assert out[2].error is None or isinstance(out[2].error, UnknownOutcomeError)
        assert await _epochs(s, keys) == [1, 2, 1]
        # the batch path still works on the next connection
        again = await s.supervision.compare_and_swap_many([Swap(keys[1], "p", 2, row(3))])
        assert again == [SwapOutcome(True)]
        await s.purge()


async def test_lost_request_of_a_swap_batch_is_unknown_per_row(relay: Relay) -> None:
    """The pipeline never reached the server: no row has evidence, so every row is
    UnknownOutcomeError (nothing guessed) and nothing changed."""
    keys = [key() for _ in range(3)]
    async with RedisStores(relay.url(f"astest-{uuid.uuid4().hex[:8]}"), pool_size=4) as s:
        for k in keys:
            assert await s.supervision.compare_and_swap(k, "p", None, row(1))
        relay.lose_next_request()
        out = await s.supervision.compare_and_swap_many(_batch(keys))
        assert relay.cut == 1, "the relay did not cut the connection"
        for outcome in out:
            assert not outcome.swapped
            assert isinstance(outcome.error, UnknownOutcomeError)
        assert await _epochs(s, keys) == [1, 1, 1]
        await s.purge()


# --- CLIENT KILL of the adapter's own connections ---------------------------------


def _admin_for(url: str, request: pytest.FixtureRequest) -> Admin:
    if "+cluster" in url:
        cluster: ValkeyCluster = request.getfixturevalue("valkey_cluster")
        return Admin(cluster.ports)
    return Admin([host_port(url)[1]])


async def _wait_for_command(admin: Admin, name: str, command: str) -> None:
    for _ in range(500):
        for c in admin.clients:
            for entry in await c.client_list():
                if entry.get("name") == name and entry.get("cmd") == command:
                    return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no connection named {name!r} ever ran {command!r}")


@pytest.mark.parametrize("server", ["valkey", "valkey-cluster"])
async def test_client_kill_while_the_write_waits(
    server: str, request: pytest.FixtureRequest
) -> None:
    """CLIENT PAUSE WRITE holds the CAS on the server; CLIENT KILL drops it there. The
    adapter cannot know that: UnknownOutcomeError, and the row is unchanged."""
    base = (
        request.getfixturevalue("valkey_server").url
        if server == "valkey"
        else request.getfixturevalue("valkey_cluster").url
    )
    name = f"kill-{uuid.uuid4().hex[:8]}"
    url = with_prefix(base)
    admin = _admin_for(url, request)
    k = key()
    try:
        async with RedisStores(url, client_name=name) as s:
            assert await s.supervision.compare_and_swap(k, "p", None, row(1))
            await admin.pause_writes(10_000)
            try:
                call = asyncio.create_task(s.supervision.compare_and_swap(k, "p", 1, row(2)))
                await _wait_for_command(admin, name, "evalsha")
                assert await admin.kill(name) >= 1
            finally:
                await admin.unpause()
            with pytest.raises(UnknownOutcomeError):
                await call
            view = await s.supervision.read(k, "p")
            assert view.row is not None and view.row.epoch == 1
            assert await s.supervision.compare_and_swap(k, "p", 1, row(2)), "not usable after"
            await s.purge()
    finally:
        await admin.close()


@dataclass
class Ledger:
    """What one producer was told, to compare with what the store holds."""

    acked: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    cas_true: int = 0
    cas_unknown: int = 0
    errors: list[str] = field(default_factory=list)


async def _produce(s: RedisStores, k: ConversationKey, ledger: Ledger, stop: asyncio.Event) -> None:
    """Append unique messages and take the lease over and over until told to stop."""
    i = 0
    epoch = 0
    while not stop.is_set():
        mid = f"m{i}"
        i += 1
        try:
            await s.conversations.append_messages(k, "p", [Message(mid, "user", i)])
            ledger.acked.append(mid)
        except UnknownOutcomeError:
            ledger.unknown.append(mid)
        except BackendUnavailableError:
            ledger.refused.append(mid)
        try:
            if await s.supervision.compare_and_swap(k, "p", epoch or None, row(epoch + 1)):
                ledger.cas_true += 1
                epoch += 1
            else:
                ledger.errors.append(f"CAS {epoch}->{epoch + 1} returned False")
        except UnknownOutcomeError:
            ledger.cas_unknown += 1
            epoch = await _current_epoch(s, k)
        except BackendUnavailableError:
            ledger.refused.append(f"cas{epoch}")
            await asyncio.sleep(0.01)
            epoch = await _current_epoch(s, k)
        await asyncio.sleep(0)


async def _current_epoch(s: RedisStores, k: ConversationKey) -> int:
    for _ in range(200):
        try:
            view = await s.supervision.read(k, "p")
            return 0 if view.row is None else view.row.epoch
        except BackendUnavailableError:
            await asyncio.sleep(0.05)
    raise AssertionError("the store never came back")


async def _verify(s: RedisStores, k: ConversationKey, ledger: Ledger) -> None:
    assert not ledger.errors, ledger.errors
    stored = await s.conversations.read_messages(k, "p")
    ids = [m.id for m in stored]
    assert len(ids) == len(set(ids)), "a message was applied twice"
    assert [m.seq for m in stored] == list(range(len(stored))), "seqs are not contiguous"
    missing = set(ledger.acked) - set(ids)
    assert not missing, f"acknowledged appends lost: {sorted(missing)}"
    extra = set(ids) - set(ledger.acked) - set(ledger.unknown)
    assert not any(r in ids for r in ledger.refused), "a refused append was applied"
    assert not extra, f"appends reported as refused were applied: {sorted(extra)}"
    view = await s.supervision.read(k, "p")
    assert view.row is not None
    assert ledger.cas_true <= view.row.epoch <= ledger.cas_true + ledger.cas_unknown


async def test_client_kill_storm(url: str, request: pytest.FixtureRequest) -> None:
    """Producers append and take leases while every connection of theirs is killed over
    and over: nothing acknowledged is lost, nothing is applied twice, nothing refused
    is applied."""
    name = f"storm-{uuid.uuid4().hex[:8]}"
    if "+cluster" in url:
        admin = _admin_for(url, request)
    else:
        host, port = host_port(url)
        admin = Admin([port], host)
    keys = [key() for _ in range(4)]
    ledgers = [Ledger() for _ in keys]
    stop = asyncio.Event()
    kills = 0
    try:
        async with RedisStores(url, client_name=name, pool_size=8) as s:
            producers = [
                asyncio.create_task(_produce(s, k, ledger, stop))
                for k, ledger in zip(keys, ledgers, strict=True)
            ]
            rounds = 0
            while rounds < 60 and not all(len(ledger.acked) >= 20 for ledger in ledgers):
                await asyncio.sleep(random.uniform(0.005, 0.03))
                kills += await admin.kill(name)
                rounds += 1
            stop.set()
            await asyncio.gather(*producers)
            for k, ledger in zip(keys, ledgers, strict=True):
                await _verify(s, k, ledger)
            outcomes = sum(len(x.unknown) + x.cas_unknown for x in ledgers) + s.ctx.reconciled
            print(f"kills={kills} reconciled={s.ctx.reconciled} unknown/refused={outcomes}")
    finally:
        await admin.close()
    assert kills > 0


# --- pool exhaustion ---------------------------------------------------------------


async def test_calls_waiting_on_a_full_pool_are_served_not_starved(
    valkey_server: ValkeyServer,
) -> None:
    """More concurrent callers than pooled connections: a connection a finished call
    leaves goes to the caller that has waited longest, not to one arriving later, so every
    caller is served (none times out while others keep the connections)."""
    callers, reads = 12, 20
    k = key()
    async with RedisStores(with_prefix(valkey_server.url), pool_size=2, pool_timeout=2.0) as s:

        async def reader() -> int:
            for _ in range(reads):
                await s.supervision.read(k, "p")
            return reads

        assert await asyncio.gather(*(reader() for _ in range(callers))) == [reads] * callers
        await s.purge()


@pytest.mark.parametrize("server", ["valkey", "valkey-cluster"])
async def test_pool_exhaustion_waits_then_fails_clearly(
    server: str, request: pytest.FixtureRequest
) -> None:
    base = (
        request.getfixturevalue("valkey_server").url
        if server == "valkey"
        else request.getfixturevalue("valkey_cluster").url
    )
    url = with_prefix(base)
    name = f"pool-{uuid.uuid4().hex[:8]}"
    admin = _admin_for(url, request)
    a, b, c = key(), key(), key()
    try:
        async with RedisStores(url, client_name=name, pool_size=2, pool_timeout=0.3) as s:
            await admin.pause_writes(10_000)
            try:
                held = [
                    asyncio.create_task(s.supervision.compare_and_swap(x, "p", None, row(1)))
                    for x in (a, b)
                ]
                for _ in range(500):
                    if sum(1 for _ in await admin.connections(name)) >= 2:
                        break
                    await asyncio.sleep(0.01)
                with pytest.raises(BackendUnavailableError, match="exhausted") as info:
                    await s.supervision.compare_and_swap(c, "p", None, row(1))
                assert not isinstance(info.value, UnknownOutcomeError)
            finally:
                await admin.unpause()
            assert await asyncio.gather(*held) == [True, True]
            view = await s.supervision.read(c, "p")
            assert view.row is None, "the refused call must not have been sent"
            assert await s.supervision.compare_and_swap(c, "p", None, row(1))
            await s.purge()
    finally:
        await admin.close()


# --- the server crashes and restarts with the AOF on -------------------------------


async def _until(check: Callable[[], bool], what: str) -> None:
    """Let the producers run until ``check()`` holds (bounded, so a bug cannot hang)."""
    for _ in range(3000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never reached: {what}")


async def test_crash_and_restart_with_aof_always() -> None:
    """SIGKILL the server mid-workload, restart it on the same port and data: every
    acknowledged write is there (appendfsync always), none twice, and calls made while
    it was down were refused as unavailable (not sent), not reported as done."""
    with ValkeyServer(appendonly=True, appendfsync="always") as server:
        url = with_prefix(server.url)
        keys = [key() for _ in range(3)]
        ledgers = [Ledger() for _ in keys]
        stop = asyncio.Event()
        async with RedisStores(url, pool_size=8, connect_timeout=1.0, reconnect_window=0.3) as s:
            producers = [
                asyncio.create_task(_produce(s, k, ledger, stop))
                for k, ledger in zip(keys, ledgers, strict=True)
            ]
            await _until(lambda: min(len(x.acked) for x in ledgers) >= 15, "15 appends each")
            server.kill()
            noticed = sum(len(x.refused) + len(x.unknown) + x.cas_unknown for x in ledgers)
            await _until(
                lambda: (
                    sum(len(x.refused) + len(x.unknown) + x.cas_unknown for x in ledgers)
                    >= noticed + 3
                ),
                "the producers meet the outage",
            )
            with pytest.raises(BackendUnavailableError) as info:
                await s.conversations.append_messages(keys[0], "p", [Message("down", "user", 0)])
            assert not isinstance(info.value, UnknownOutcomeError), "nothing was sent"
            server.start()
            marks = [len(x.acked) for x in ledgers]
            await _until(
                lambda: all(len(x.acked) >= m + 15 for x, m in zip(ledgers, marks, strict=True)),
                "15 more appends each after the restart",
            )
            stop.set()
            await asyncio.gather(*producers)
            for k, ledger in zip(keys, ledgers, strict=True):
                await _verify(s, k, ledger)
            stored = await s.conversations.read_messages(keys[0], "p")
            assert "down" not in [m.id for m in stored]


# --- WAIT / WAITAOF ----------------------------------------------------------------


async def test_waitaof_local_acknowledges_after_fsync(valkey_server: ValkeyServer) -> None:
    url = with_prefix(valkey_server.url)
    async with RedisStores(url, wait_aof_local=1) as s:
        assert Capability.DURABLE in s.capabilities
        k = key()
        assert await s.supervision.compare_and_swap(k, "p", None, row(1))
        stored = await s.conversations.append_messages(k, "p", [Message("a", "user", 1)])
        assert [m.id for m in stored] == ["a"]
        await s.purge()


async def test_wait_replicas_unconfirmed_is_unknown_not_success(
    valkey_server: ValkeyServer,
) -> None:
    """No replica exists, so WAIT 1 cannot be met: the write ran on the primary, but the
    caller is told its outcome is unknown, not that it succeeded."""
    url = with_prefix(valkey_server.url)
    async with RedisStores(url, wait_replicas=1, wait_timeout_ms=20) as s:
        k = key()
        with pytest.raises(UnknownOutcomeError, match="WAIT"):
            await s.supervision.compare_and_swap(k, "p", None, row(1))
        view = await s.supervision.read(k, "p")
        assert view.row is not None and view.row.epoch == 1, "it did run on the primary"
        assert await s.supervision.compare_and_swap(k, "p", 0, row(2)) is False
        await s.purge()


async def test_waitaof_refused_without_aof() -> None:
    with ValkeyServer(appendonly=False) as server, pytest.raises(UnsupportedError, match="aof"):
        async with RedisStores(with_prefix(server.url), wait_aof_local=1):
            pass


def _major_minor(version: str) -> tuple[int, int]:
    major, minor, *_ = (int(part) for part in version.split("."))
    return major, minor


OLD_REDIS = MACHINE_BINARY is not None and _major_minor(redis_version(MACHINE_BINARY)) < (7, 2)
"""The machine's Redis predates WAITAOF (7.0 here)."""
if not OLD_REDIS:
    not_run("WAITAOF refused on a Redis before 7.2", "the machine has no Redis before 7.2")
else:

    async def test_waitaof_refused_on_redis_before_7_2(machine_redis: ValkeyServer) -> None:
        """Redis 7.0 has no WAITAOF: asking for it fails at open, clearly."""
        async with RedisStores(with_prefix(machine_redis.url)) as probe:
            version = (await probe.client.on_primaries("INFO", "server"))[0]
        assert b"redis_version:7.0" in version or b"redis_version:6." in version
        with pytest.raises(UnsupportedError, match="WAITAOF"):
            async with RedisStores(with_prefix(machine_redis.url), wait_aof_local=1):
                pass


async def test_unreachable_server_is_unavailable() -> None:
    from tests.servers.valkey import free_port

    stores = RedisStores(
        f"redis://127.0.0.1:{free_port()}/0", connect_timeout=0.5, reconnect_window=0.2
    )
    with pytest.raises(BackendUnavailableError) as info:
        await stores.open()
    assert not isinstance(info.value, UnknownOutcomeError)
