"""The lease's life on a real backend: its bounds, how it is lost, sealed, released and
dropped, and that each write it makes reaches the store under its key and epoch.

The protocol contract shows the rules hold under races and takeovers; these tests pin
the outcomes of each step, so a lease that forgets why it was lost, keeps beating after
release, or writes without its epoch fails here.
"""

from __future__ import annotations

import asyncio

import pytest

from agentstores.errors import (
    FencedError,
    LeaseLostError,
    NotOwnedError,
    StaleWriteError,
    UsageError,
)
from agentstores.models import Message
from agentstores.protocol import (
    Lease,
    LeaseConfig,
    claim,
    liveness,
    start_turn,
)
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .scenarios import check_fenced, check_stale

USER = "owner"
LONG = LeaseConfig(dead_after=60.0, heartbeat_interval=1.0)
"""Nothing looks dead however slow the machine is (a started heartbeat's first beat comes
at a random point of its first second)."""
ASLEEP = LeaseConfig(dead_after=7200.0, heartbeat_interval=3600.0)
"""A started heartbeat whose first beat is still to come when a producer's first write is
answered (it comes at a random point of the first hour: a write of 40 ms is beaten to it
once in 90,000 runs): for a test about what the producer's own write sees."""


class LeaseLifecycleContract(ContractBase):
    @promise("protocol.lease.bounds")
    def test_lease_config_bounds(self) -> None:
        LeaseConfig(dead_after=0.2, heartbeat_interval=0.1)
        LeaseConfig(
            dead_after=0.2,
            heartbeat_interval=0.1,
            heartbeat_timeout=0.5,
            claim_attempts=1,
            write_attempts=1,
        )
        for wrong in (
            {"heartbeat_interval": 0.0},
            {"dead_after": 1.0, "heartbeat_interval": 1.0},
            {"heartbeat_timeout": 0.0},
            {"write_attempts": 0},
            {"claim_attempts": 0},
        ):
            with pytest.raises(UsageError):
                LeaseConfig(**wrong)

    @promise("protocol.lease.lost")
    def test_lost_lease_keeps_its_reason(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            before = await stores.supervision.read(key, USER)
            lease = await claim(stores, key, USER, "a1", lease_config=LONG)
            assert (lease.reason, lease.previous, lease.config) == ("new", None, LONG)
            assert lease.epoch == before.fence + 1
            assert (lease.status, lease.lost_reason, lease.heartbeats) == ("held", None, 0)
            assert liveness(await stores.supervision.read(key, USER), LONG.dead_after) == "live"
            await lease.heartbeat_once()
            await lease.heartbeat_once()
            assert lease.heartbeats == 2
            beat = lease.start_heartbeat()
            told: list[BaseException] = []
            lease.on_lost(told.append)

            heir = await claim(stores, key, USER, "a1", lease_config=LONG)
            assert heir.reason == "resume" and heir.previous is not None
            assert heir.previous.epoch == lease.epoch
            with pytest.raises(FencedError):
                await lease.save_state({"late": True})
            reason = lease.lost_reason
            assert lease.status == "lost" and isinstance(reason, FencedError)
            assert told == [reason], "on_lost was not told why"
            await asyncio.sleep(0)
            assert beat.done(), "a lost lease kept its heartbeat"
            late: list[BaseException] = []
            lease.on_lost(late.append)
            assert late == [reason], "a callback added after the loss was not told at once"
            with pytest.raises(LeaseLostError) as refused:
                await lease.record(1, "late")
            assert refused.value.__cause__ is reason
            assert await lease.release() is False and lease.status == "lost"
            row = (await stores.supervision.read(key, USER)).row
            assert row is not None and row.epoch == heir.epoch
            await heir.release()

        self.run(backend, body)

    @promise("protocol.lease.lost")
    def test_failing_heartbeat_loses_the_lease(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            owned = await claim(stores, key, USER, "a1", lease_config=LONG)
            intruder = Lease(stores, key, "intruder", "a1", owned.epoch, lease_config=LONG)
            assert intruder.reason == "new"
            with pytest.raises(LeaseLostError):
                await intruder.heartbeat_once()
            assert isinstance(intruder.lost_reason, NotOwnedError)
            assert intruder.status == "lost"
            await owned.release()

        self.run(backend, body)

    @promise("protocol.lease.lost")
    def test_refused_beat_and_seal_keep_their_reason(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            first = await claim(stores, key, USER, "a1", lease_config=LONG)
            second = await claim(stores, key, USER, "a1", lease_config=LONG)
            with pytest.raises(LeaseLostError):
                await first.heartbeat_once()
            assert isinstance(first.lost_reason, FencedError)
            third = await claim(stores, key, USER, "a1", lease_config=LONG)
            with pytest.raises(LeaseLostError):
                await second.seal()
            assert isinstance(second.lost_reason, FencedError)
            await third.release()

        self.run(backend, body)

    @promise("protocol.lease.lost")
    def test_loss_cancels_bound_tasks_but_not_the_caller(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            # A beat would find the takeover too, and cancel the producer before its own
            # write is refused (a lease lost, which another test covers).
            lease = await claim(stores, key, USER, "a1", lease_config=ASLEEP)
            await claim(stores, key, USER, "a1", lease_config=LONG)

            async def producer() -> str:
                try:
                    await lease.save_state({"late": True})
                except FencedError:
                    await asyncio.sleep(0)
                    return "stopped on its own"
                return "wrote"

            assert await lease.run(producer()) == "stopped on its own"

            other = await claim(stores, self.key(), USER, "a2", lease_config=LONG)
            outer = asyncio.create_task(other.run(asyncio.Event().wait()))
            await asyncio.sleep(0)
            outer.cancel()
            other.mark_lost(RuntimeError("gone"))
            with pytest.raises(asyncio.CancelledError):
                await outer

        self.run(backend, body)

    @promise("protocol.lease.lifecycle")
    def test_seal_release_and_drop(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            lease = await claim(stores, key, USER, "a1", lease_config=LONG)
            beat = lease.start_heartbeat()
            await lease.record(1, "partial")
            with pytest.raises(UsageError):
                await lease.seal("running")  # type: ignore[arg-type]
            await lease.seal()
            assert beat.done(), "sealing left the heartbeat running"
            row = (await stores.supervision.read(key, USER)).row
            assert lease.status == "sealed" and row is not None and row.status == "done"
            assert await lease.drop_recording() is True
            assert await stores.recording.read(key, USER) is None
            assert await lease.release() is True and lease.status == "sealed"
            assert (await stores.supervision.read(key, USER)).row is None

            second = await claim(stores, key, USER, "a2", lease_config=LONG)
            assert second.reason == "new" and second.epoch == lease.epoch + 1
            beat = second.start_heartbeat()
            assert await second.release() is True and second.status == "released"
            assert beat.done(), "releasing left the heartbeat running"
            assert (await stores.supervision.read(key, USER)).row is None

        self.run(backend, body)

    @promise("protocol.lease.lifecycle")
    def test_context_seals_only_a_failed_turn(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            async with await claim(stores, key, USER, "a1", lease_config=LONG) as lease:
                pass
            row = (await stores.supervision.read(key, USER)).row
            assert lease.status == "held" and row is not None and row.status == "running"
            await lease.release()

            with pytest.raises(RuntimeError):
                async with await claim(stores, key, USER, "a2", lease_config=LONG) as failed:
                    raise RuntimeError("the producer broke")
            row = (await stores.supervision.read(key, USER)).row
            assert failed.status == "sealed" and row is not None and row.status == "errored"

        self.run(backend, body)

    @promise("protocol.lease.lifecycle")
    def test_run_passes_a_producers_own_cancellation_on(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def gives_up() -> None:
            raise asyncio.CancelledError

        async def body(stores: Stores) -> None:
            lease = await claim(stores, key, USER, "a1", lease_config=LONG)
            with pytest.raises(asyncio.CancelledError):
                await lease.run(gives_up())
            assert lease.status == "held" and not lease.lost.is_set()
            await lease.release()

        self.run(backend, body)

    @promise("protocol.lease.writes")
    def test_lease_writes_carry_key_principal_and_epoch(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            lone = await claim(stores, key, USER, "a0", lease_config=LONG)
            with pytest.raises(LookupError):
                await lone.append([Message("u0", "user", "no conversation yet")])
            await lone.release()

            lease = await start_turn(
                stores,
                key,
                USER,
                "a1",
                None,
                user_message=Message("u1", "user", "q"),
                lease_config=LONG,
                title="first",
            )
            assert lease.config is LONG
            info = await stores.conversations.get_conversation(key, USER)
            assert info is not None and info.title == "first"
            await lease.append([Message("a1", "assistant", "x")], title="renamed")
            with pytest.raises(StaleWriteError) as moved:
                await lease.append([Message("a2", "assistant", "y")], expected_tail="u1")
            check_stale(moved.value, tail="a1", expected="u1", what="a lease's append on a1")
            await lease.set_last_turn_status("complete")
            info = await stores.conversations.get_conversation(key, USER)
            assert info is not None
            assert info.title == "renamed" and info.last_turn_status == "complete"
            assert info.message_count == 2
            await lease.record(1, "answer")

            heir = await claim(stores, key, USER, "a1", lease_config=LONG)
            await heir.record(2, "heir's answer")
            assert await lease.drop_recording() is False
            recorded = await stores.recording.read(key, USER)
            assert recorded is not None and recorded.epoch == heir.epoch
            with pytest.raises(FencedError) as refused:
                await lease.append([Message("a3", "assistant", "stale")])
            check_fenced(refused.value, lease.epoch, "a taken-over lease's append")
            paused = Lease(stores, key, USER, "a1", lease.epoch, lease_config=LONG)
            with pytest.raises(FencedError) as refused:
                await paused.set_last_turn_status("errored")
            check_fenced(refused.value, lease.epoch, "a paused lease's set_last_turn_status")
            info = await stores.conversations.get_conversation(key, USER)
            assert info is not None and info.last_turn_status == "complete"
            assert info.message_count == 2
            await heir.release()

        self.run(backend, body)
