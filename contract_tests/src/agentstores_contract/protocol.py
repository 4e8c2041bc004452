"""The protocol layer on a real backend: lease, fencing, stale guard,
sweeper, rehydrate. The rules live in ``agentstores.protocol``; these tests prove a
backend gives them what they rely on (atomic CAS, the store clock, cross-store fences,
atomic sweep re-checks, the erasure cascade).

Timings are short (dead after 0.3 s) and nothing asserts how long anything took: waits
poll with a generous deadline, so a slow machine makes a test slower, not red.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest

from agentstores.errors import (
    BusyError,
    ConflictError,
    ErasedError,
    FencedError,
    LeaseLostError,
    StaleWriteError,
)
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, Role, SupervisionRow
from agentstores.protocol import (
    Lease,
    LeaseConfig,
    Sweeper,
    claim,
    rehydrate,
    start_turn,
)
from agentstores.stores import IdleFor, OverCap, Stores

from . import not_implemented
from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .runtime import clients
from .scenarios import check_fenced, check_stale

T = TypeVar("T")

USER = "owner"
SHORT = LeaseConfig(dead_after=0.3, heartbeat_interval=0.1)
"""For takeovers: a silent producer is dead after 0.3 s of store time."""
LONG = LeaseConfig(dead_after=60.0, heartbeat_interval=1.0)
"""For races and busy checks: nothing can look dead however slow the machine is."""
PATIENCE = 30.0
"""Deadline of any poll (seconds); reaching it fails the test, a slow run never does."""


async def _until(attempt: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Poll ``attempt`` until it gives a value (not None)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while True:
        value = await attempt()
        if value is not None:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"gave up after {PATIENCE}s waiting for {what}")
        await asyncio.sleep(0.05)


async def _take_over_when_dead(stores: Stores, key: ConversationKey, message_id: str) -> Lease:
    async def attempt() -> Lease | None:
        try:
            return await claim(stores, key, USER, message_id, lease_config=SHORT, resume_live=False)
        except BusyError:
            return None

    return await _until(attempt, "the silent producer to be seen dead")


async def _stale_writes(stores: Stores, key: ConversationKey, epoch: int) -> dict[str, Any]:
    """Try every producer write with ``epoch``; map each to "refused" or what it returned."""
    attempts: dict[str, Callable[[], Awaitable[Any]]] = {
        "recording.put": lambda: stores.recording.put(
            key, USER, RecordedEvent(999, "stale", "a1", epoch)
        ),
        "state.save": lambda: stores.state.save(key, USER, {"stale": True}, epoch=epoch),
        "conversations.append_messages": lambda: stores.conversations.append_messages(
            key, USER, [Message("stale", "assistant", "stale")], epoch=epoch
        ),
        "conversations.set_last_turn_status": lambda: stores.conversations.set_last_turn_status(
            key, USER, "errored", epoch=epoch
        ),
        "supervision.compare_and_swap": lambda: stores.supervision.compare_and_swap(
            key, USER, epoch, SupervisionRow("done", "a1", epoch)
        ),
        "supervision.delete": lambda: stores.supervision.delete(key, USER, "a1", epoch),
        "recording.delete": lambda: stores.recording.delete(key, USER, "a1", epoch=epoch),
        "state.delete": lambda: stores.state.delete(key, USER, epoch=epoch),
    }
    outcomes: dict[str, Any] = {}
    for name, call in attempts.items():
        try:
            result = await call()
        except FencedError as exc:
            check_fenced(exc, epoch, f"a stale {name}")
            result = False
        outcomes[name] = "refused" if result is False else result
    return outcomes


class ProtocolContract(ContractBase):
    @promise("protocol.claim.exclusive")
    def test_racing_claims_leave_one_writer(self, backend: BackendUnderTest) -> None:
        n, rounds = self.profile.clients, self.profile.rounds

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, n) as bundles:
                for _ in range(rounds):
                    key = self.key()
                    results = await asyncio.gather(
                        *(
                            claim(s, key, USER, f"m{i}", lease_config=LONG)
                            for i, s in enumerate(bundles)
                        ),
                        return_exceptions=True,
                    )
                    not_implemented.note_all(results)
                    won = [r for r in results if isinstance(r, Lease)]
                    lost = [r for r in results if not isinstance(r, Lease)]
                    assert len(won) == 1, f"{len(won)} producers claimed one turn: {won}"
                    assert all(isinstance(r, BusyError) for r in lost), lost
                    occupants = {r.message_id for r in lost if isinstance(r, BusyError)}
                    assert occupants <= {won[0].message_id}, occupants

                    # One turn resumed by many at once: each may win a higher epoch in
                    # turn, but only the last of them can still write.
                    key = self.key()
                    assert await claim(bundles[0], key, USER, "same", lease_config=LONG)
                    resumed = await asyncio.gather(
                        *(claim(s, key, USER, "same", lease_config=LONG) for s in bundles),
                        return_exceptions=True,
                    )
                    not_implemented.note_all(resumed)
                    leases = [r for r in resumed if isinstance(r, Lease)]
                    others = [r for r in resumed if not isinstance(r, Lease)]
                    assert all(isinstance(r, ConflictError) for r in others), others
                    epochs = [lease.epoch for lease in leases]
                    assert len(set(epochs)) == len(epochs), f"two leases share an epoch {epochs}"
                    writers = []
                    for lease in leases:
                        try:
                            await lease.save_state({"by": lease.epoch})
                            writers.append(lease.epoch)
                        except FencedError:
                            pass
                    assert writers == [max(epochs)], (
                        f"leases {writers} wrote; only the highest ({max(epochs)}) may"
                    )

        self.run(backend, body)

    @promise("protocol.claim.busy")
    def test_busy_names_the_occupant(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, 2) as (mine, theirs):
                lease = await claim(mine, key, USER, "occupant", lease_config=LONG)
                with pytest.raises(BusyError) as info:
                    await claim(theirs, key, USER, "newcomer", lease_config=LONG)
                assert info.value.message_id == "occupant"
                with pytest.raises(BusyError):
                    await claim(theirs, key, USER, "occupant", lease_config=LONG, resume_live=False)
                await lease.seal("done")
                after = await claim(theirs, key, USER, "newcomer", lease_config=LONG)
                assert (after.reason, after.epoch) == ("sealed", lease.epoch + 1)

        self.run(backend, body)

    @promise("protocol.heartbeat.refresh")
    def test_heartbeat_restamps_on_the_store_clock(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            lease = await claim(stores, key, USER, "m1", lease_config=SHORT)
            before = (await stores.supervision.read(key, USER)).row
            await asyncio.sleep(0.05)
            await lease.heartbeat_once()
            view = await stores.supervision.read(key, USER)
            assert before is not None and before.heartbeat_at is not None
            assert view.row is not None and view.row.heartbeat_at is not None
            assert view.row.heartbeat_at > before.heartbeat_at, "heartbeat_at did not move"
            assert view.now >= view.row.heartbeat_at, "read's now is behind the stamp"
            assert view.row.epoch == lease.epoch and view.row.status == "running"

        self.run(backend, body)

    @promise("protocol.takeover.dead")
    def test_silent_producer_is_taken_over_at_the_next_epoch(
        self, backend: BackendUnderTest
    ) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, 2) as (first, second):
                dead = await claim(first, key, USER, "a1", lease_config=SHORT)
                heir = await _take_over_when_dead(second, key, "a1")
                assert heir.reason == "dead"
                assert heir.epoch == dead.epoch + 1
                assert heir.previous_age is not None and heir.previous_age > SHORT.dead_after
                with pytest.raises(FencedError) as refused:
                    await dead.save_state({"late": True})
                check_fenced(refused.value, dead.epoch, "the dead producer's save_state")
                await heir.save_state({"heir": True})
                assert await second.state.load(key, USER) == {"heir": True}

        self.run(backend, body)

    @promise("protocol.heartbeat.lost")
    def test_refused_heartbeat_stops_the_producer(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, 2) as (first, second):
                lease = await claim(first, key, USER, "a1", lease_config=SHORT)
                running = asyncio.create_task(lease.run(asyncio.Event().wait()))
                heir = await claim(second, key, USER, "a1", lease_config=SHORT)
                assert heir.reason in ("resume", "dead") and heir.epoch > lease.epoch
                with pytest.raises(LeaseLostError):
                    await asyncio.wait_for(running, PATIENCE)
                assert lease.lost.is_set()
                row = (await second.supervision.read(key, USER)).row
                assert row is not None and row.epoch == heir.epoch, "the stopped producer beat on"

        self.run(backend, body)

    @promise("protocol.fencing.paused_producer")
    def test_paused_producer_lands_no_write(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            async with clients(backend, stores, 2) as (first, second):
                paused = await start_turn(
                    first,
                    key,
                    USER,
                    "a1",
                    None,
                    user_message=Message("u1", "user", "q"),
                    lease_config=SHORT,
                )
                await paused.record(3, "abc")
                await paused.save_state({"pos": 3})
                heir = await _take_over_when_dead(second, key, "a1")
                await heir.record(5, "abcde")
                await heir.save_state({"pos": 5})

                # The paused producer wakes up and carries on as if nothing happened.
                with pytest.raises(FencedError) as refused:
                    await paused.record(7, "abcdefg")
                check_fenced(refused.value, paused.epoch, "the paused producer's record")
                with pytest.raises(LeaseLostError):
                    await paused.append([Message("a1", "assistant", "abcdefg")])
                outcomes = await _stale_writes(first, key, paused.epoch)
                landed = {k: v for k, v in outcomes.items() if v != "refused"}
                assert not landed, f"stale writes landed: {landed}"

                record = await second.recording.read(key, USER)
                assert record is not None
                assert (record.index, record.message, record.epoch) == (5, "abcde", heir.epoch)
                assert await second.state.load(key, USER) == {"pos": 5}
                ids = [m.id for m in await second.conversations.read_messages(key, USER)]
                assert ids == ["u1"], ids
                info = await second.conversations.get_conversation(key, USER)
                assert info is not None and info.last_turn_status == "running"
                view = await second.supervision.read(key, USER)
                assert view.row is not None
                assert (view.row.status, view.row.epoch) == ("running", heir.epoch)
                assert view.fence == heir.epoch

        self.run(backend, body)

    @promise("protocol.turn.stale_guard")
    def test_claim_first_then_tail(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            first = await start_turn(
                stores,
                key,
                USER,
                "a1",
                None,
                user_message=Message("u1", "user", 1),
                lease_config=LONG,
            )
            with pytest.raises(BusyError):
                await start_turn(stores, key, USER, "a2", "wrong-tail", lease_config=LONG)
            await first.append([Message("a1", "assistant", 2)], expected_tail="u1")
            await first.seal("done")
            with pytest.raises(StaleWriteError) as info:
                await start_turn(
                    stores,
                    key,
                    USER,
                    "a2",
                    "u1",
                    user_message=Message("u2", "user", 3),
                    lease_config=LONG,
                )
            assert not isinstance(info.value, BusyError)
            check_stale(info.value, tail="a1", expected="u1", what="start_turn on a moved tail")
            assert (await stores.supervision.read(key, USER)).row is None, "lease not released"
            ids = [m.id for m in await stores.conversations.read_messages(key, USER)]
            assert ids == ["u1", "a1"]
            nxt = await start_turn(
                stores,
                key,
                USER,
                "a2",
                "a1",
                user_message=Message("u2", "user", 3),
                lease_config=LONG,
            )
            assert nxt.epoch > first.epoch
            ids = [m.id for m in await stores.conversations.read_messages(key, USER)]
            assert ids == ["u1", "a1", "u2"]

        self.run(backend, body)

    @promise("protocol.sweep.touched_survives")
    def test_touched_mid_sweep_survives(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()
        renewed, doomed = ConversationKey(tenant, "renewed"), ConversationKey(tenant, "doomed")

        async def body(stores: Stores) -> None:
            past = await stores.now() - timedelta(seconds=1)
            for key in (renewed, doomed):
                await stores.conversations.append_messages(
                    key, USER, [Message("u1", "user", "hi")], expires_at=past
                )
            touched: list[ConversationKey] = []

            async def renew(rule: str, keys: list[ConversationKey]) -> None:
                if renewed in keys and not touched:
                    later = await stores.now() + timedelta(days=1)
                    await stores.conversations.append_messages(
                        renewed, USER, [Message("u2", "user", "still here")], expires_at=later
                    )
                    touched.append(renewed)

            report = await Sweeper(stores, on_batch=renew).sweep_once()
            assert touched, "the sweep never offered the expired conversation"
            assert report.survived >= 1
            assert await stores.conversations.get_conversation(doomed, USER) is None
            info = await stores.conversations.get_conversation(renewed, USER)
            assert info is not None and info.message_count == 2

            # Idle and over-cap rules re-check atomically too (store primitives, our keys).
            idle = ConversationKey(tenant, "idle")
            await stores.conversations.append_messages(idle, USER, [Message("u1", "user", 1)])
            rule = IdleFor(timedelta(milliseconds=200))

            async def offered() -> bool | None:
                return (
                    True
                    if idle in await stores.conversations.find_sweepable(rule, limit=1000)
                    else None
                )

            await _until(offered, "the conversation to become idle")
            await stores.conversations.append_messages(idle, USER, [Message("u2", "user", 2)])
            assert not await stores.conversations.erase_if(idle, rule), "touched, yet erased"
            capped = self.tenant()
            # On equal update times the higher session id ranks first: name them so a
            # coarse store clock cannot reorder them.
            older, newer = ConversationKey(capped, "a-older"), ConversationKey(capped, "b-newer")
            for key in (older, newer):
                await stores.conversations.append_messages(key, USER, [Message("u", "user", 0)])
            assert not await stores.conversations.erase_if(newer, OverCap(1))
            await stores.conversations.append_messages(older, USER, [Message("v", "user", 1)])
            assert not await stores.conversations.erase_if(newer, OverCap(2))
            assert await stores.conversations.erase_if(newer, OverCap(1)), (
                "the least recently updated conversation beyond the cap survived"
            )
            assert await stores.conversations.get_conversation(older, USER) is not None

        self.run(backend, body)

    @promise("protocol.sweep.cascade")
    def test_sweeper_erases_every_store(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant()
        doomed, kept = ConversationKey(tenant, "doomed"), ConversationKey(tenant, "kept")

        async def body(stores: Stores) -> None:
            now = await stores.now()
            lease = await start_turn(
                stores,
                doomed,
                USER,
                "a1",
                None,
                user_message=Message("u1", "user", "q"),
                lease_config=LONG,
                expires_at=now - timedelta(seconds=1),
            )
            await lease.record(1, "a")
            await lease.save_state({"pos": 1})
            await stores.pause_tokens.put("tok", doomed, USER, {"p": 1}, now + timedelta(days=1))
            await stores.conversations.append_messages(kept, USER, [Message("u1", "user", "q")])

            report = await Sweeper(stores).sweep_once()
            assert report.expired >= 1

            assert await stores.conversations.get_conversation(doomed, USER) is None
            assert await stores.conversations.read_messages(doomed, USER) == []
            assert await stores.recording.read(doomed, USER) is None
            assert await stores.state.load(doomed, USER) == {}
            view = await stores.supervision.read(doomed, USER)
            assert view.row is None
            with pytest.raises(LookupError):
                await stores.pause_tokens.claim("tok", doomed, USER)
            with pytest.raises(ErasedError):
                await lease.save_state({"pos": 2})
            with pytest.raises(ErasedError):
                await stores.conversations.append_messages(
                    doomed, USER, [Message("u9", "user", "late")]
                )
            with pytest.raises(ErasedError):
                await claim(stores, doomed, USER, "a2", lease_config=LONG)
            assert await stores.conversations.get_conversation(kept, USER) is not None

        self.run(backend, body)

    @promise("protocol.rehydrate")
    def test_rehydrate(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            tool_call_only = {"tool_calls": [{"id": "c1", "name": "search"}]}
            rows: list[tuple[Role, object]] = [
                ("user", "first question"),
                ("assistant", [{"type": "text", "text": "first answer"}]),
                ("assistant", tool_call_only),
                ("tool", "tool output"),
                ("user", {"text": "second question"}),
                ("system", "a system note"),
                ("assistant", "  \n\t "),
                ("assistant", {"content": [{"type": "text", "text": "second answer"}]}),
                ("user", "third question"),
                ("assistant", [{"type": "tool_use", "text": "{}"}, {"type": "text"}]),
            ]
            await stores.conversations.append_messages(
                key, USER, [Message(f"m{i}", role, c) for i, (role, c) in enumerate(rows)]
            )
            got = await rehydrate(stores, key, USER, 3)
            assert [(m.id, m.role) for m in got] == [
                ("m4", "user"),
                ("m7", "assistant"),
                ("m8", "user"),
            ]
            assert [m.id for m in await rehydrate(stores, key, USER, 100)] == [
                "m0",
                "m1",
                "m4",
                "m7",
                "m8",
            ]
            # recent stays a plain read: the last user/assistant messages as stored.
            assert [m.id for m in await stores.conversations.recent(key, USER, 3)] == [
                "m7",
                "m8",
                "m9",
            ]
            assert await rehydrate(stores, key, "stranger", 3) == []

        self.run(backend, body)


__all__ = ["ProtocolContract"]
