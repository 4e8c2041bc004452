"""The turn lease on the in-memory reference backend, with a clock the test controls."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable

import pytest

from agentstores.errors import (
    BackendUnavailableError,
    BusyError,
    ConflictError,
    ErasedError,
    FencedError,
    HeartbeatTimeoutError,
    LeaseLostError,
    StaleWriteError,
)
from agentstores.keys import ConversationKey
from agentstores.memory.stores import EphemeralStoreWarning, MemoryStores, MemorySupervisionStore
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.protocol import (
    LeaseConfig,
    claim,
    liveness,
    start_turn,
)

from .conftest import ManualClock

USER = "alice"
FAST = LeaseConfig(dead_after=0.3, heartbeat_interval=0.02)


async def test_claim_on_a_fresh_key_takes_epoch_one(stores: MemoryStores, key: ConversationKey):
    lease = await claim(stores, key, USER, "m1")
    assert (lease.epoch, lease.reason, lease.previous) == (1, "new", None)
    view = await stores.supervision.read(key, USER)
    assert view.row is not None
    assert (view.row.status, view.row.message_id, view.row.epoch) == ("running", "m1", 1)
    assert liveness(view) == "live"


async def test_live_row_of_another_message_is_busy_and_names_it(
    stores: MemoryStores, key: ConversationKey
):
    await claim(stores, key, USER, "m1")
    with pytest.raises(BusyError) as info:
        await claim(stores, key, USER, "m2")
    assert info.value.message_id == "m1"
    view = await stores.supervision.read(key, USER)
    assert view.row is not None and view.row.message_id == "m1"


async def test_live_row_of_the_same_message_is_resumed_with_a_higher_epoch(
    stores: MemoryStores, key: ConversationKey
):
    first = await claim(stores, key, USER, "m1")
    second = await claim(stores, key, USER, "m1")
    assert second.reason == "resume"
    assert second.epoch == first.epoch + 1
    with pytest.raises(FencedError):
        await first.save_state({"step": 1})
    assert first.lost.is_set()
    with pytest.raises(BusyError):
        await claim(stores, key, USER, "m1", resume_live=False)


async def test_dead_row_is_taken_over_on_the_store_clock(
    stores: MemoryStores, key: ConversationKey, clock: ManualClock
):
    first = await claim(stores, key, USER, "m1")
    clock.advance(2.9)
    with pytest.raises(BusyError):
        await claim(stores, key, USER, "m2")
    clock.advance(0.2)
    second = await claim(stores, key, USER, "m2")
    assert second.reason == "dead"
    assert second.epoch == first.epoch + 1
    assert second.previous is not None and second.previous.message_id == "m1"
    assert second.previous_age is not None and second.previous_age > 3.0


async def test_heartbeat_keeps_a_slow_turn_alive(
    stores: MemoryStores, key: ConversationKey, clock: ManualClock
):
    lease = await claim(stores, key, USER, "m1")
    for _ in range(5):
        clock.advance(2.0)
        await lease.heartbeat_once()
    with pytest.raises(BusyError):
        await claim(stores, key, USER, "m2")
    assert lease.heartbeats == 5


async def test_sealed_row_is_replaced_and_a_deleted_row_restarts_above_the_fence(
    stores: MemoryStores, key: ConversationKey
):
    first = await claim(stores, key, USER, "m1")
    await first.seal("done")
    view = await stores.supervision.read(key, USER)
    assert view.row is not None and view.row.status == "done"
    second = await claim(stores, key, USER, "m2")
    assert (second.reason, second.epoch) == ("sealed", 2)
    await second.save_state({"x": 1})
    assert await second.release()
    assert (await stores.supervision.read(key, USER)).row is None
    third = await claim(stores, key, USER, "m3")
    assert (third.reason, third.epoch) == ("new", 3)


async def test_concurrent_claims_have_exactly_one_winner(
    bundle: Callable[[], MemoryStores], key: ConversationKey
):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        bundles = [await bundle().open() for _ in range(12)]
    results = await asyncio.gather(
        *(claim(s, key, USER, f"m{i}") for i, s in enumerate(bundles)), return_exceptions=True
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    losers = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(r, BusyError) for r in losers), losers
    assert {r.message_id for r in losers if isinstance(r, BusyError)} == {winners[0].message_id}


async def test_a_fenced_producer_lands_no_write_anywhere(
    stores: MemoryStores, key: ConversationKey, clock: ManualClock
):
    old = await start_turn(stores, key, USER, "a1", None, user_message=Message("u1", "user", "hi"))
    await old.record(3, {"text": "abc"})
    await old.save_state({"pos": 3})
    clock.advance(5)
    new = await claim(stores, key, USER, "a1")
    assert (new.reason, new.epoch) == ("dead", old.epoch + 1)
    await new.record(5, {"text": "abcde"})
    await new.save_state({"pos": 5})

    # Raw store calls with the old epoch: each store refuses on its own.
    with pytest.raises(FencedError):
        await stores.recording.put(key, USER, RecordedEvent(99, {"text": "zzz"}, "a1", old.epoch))
    with pytest.raises(FencedError):
        await stores.state.save(key, USER, {"pos": 99}, epoch=old.epoch)
    with pytest.raises(FencedError):
        await stores.conversations.append_messages(
            key, USER, [Message("a1", "assistant", "zzz")], epoch=old.epoch
        )
    assert not await stores.supervision.compare_and_swap(
        key, USER, old.epoch, SupervisionRow("done", "a1", old.epoch)
    )
    # Through the lease: the first refusal ends it, later calls do not reach the store.
    with pytest.raises(FencedError):
        await old.record(100, {"text": "zzzz"})
    assert old.lost.is_set() and isinstance(old.lost_reason, FencedError)
    with pytest.raises(LeaseLostError):
        await old.append([Message("a1", "assistant", "zzz")])
    with pytest.raises(LeaseLostError):
        await old.seal("done")
    assert not await old.drop_recording()

    record = await stores.recording.read(key, USER)
    assert record is not None and (record.index, record.epoch) == (5, new.epoch)
    assert await stores.state.load(key, USER) == {"pos": 5}
    assert [m.id for m in await stores.conversations.read_messages(key, USER)] == ["u1"]
    row = (await stores.supervision.read(key, USER)).row
    assert row is not None and (row.status, row.epoch) == ("running", new.epoch)


async def test_heartbeat_refused_stops_the_producer(
    stores: MemoryStores, key: ConversationKey, clock: ManualClock
):
    lease = await claim(stores, key, USER, "m1", lease_config=FAST)
    started = asyncio.Event()

    async def produce() -> None:
        started.set()
        await asyncio.Event().wait()

    runner = asyncio.create_task(lease.run(produce()))
    await started.wait()
    clock.advance(10)
    newer = await claim(stores, key, USER, "m1")
    assert newer.epoch == lease.epoch + 1
    with pytest.raises(LeaseLostError) as info:
        await asyncio.wait_for(runner, timeout=10)
    assert isinstance(info.value.__cause__, FencedError)
    assert not isinstance(info.value, HeartbeatTimeoutError)  # a takeover, not a timeout
    assert lease.status == "lost"


class _FailingSupervision(MemorySupervisionStore):
    """The in-memory store with one injected fault: compare-and-swap raises when armed."""

    armed = False

    async def _compare_and_swap(self, key, principal, expected_epoch, row):  # type: ignore[no-untyped-def]
        if self.armed:
            raise BackendUnavailableError("injected: connection reset")
        return await super()._compare_and_swap(key, principal, expected_epoch, row)


async def test_heartbeat_that_raises_stops_the_producer_and_keeps_the_error(
    stores: MemoryStores, key: ConversationKey
):
    failing = _FailingSupervision(stores.data)
    stores.supervision = failing
    lease = await claim(stores, key, USER, "m1", lease_config=FAST)
    notified: list[BaseException] = []
    lease.on_lost(notified.append)
    blocked = asyncio.Event()

    async def produce() -> str:
        await blocked.wait()
        return "finished"

    runner = asyncio.create_task(lease.run(produce()))
    await asyncio.sleep(0)
    failing.armed = True
    with pytest.raises(HeartbeatTimeoutError) as info:  # unconfirmed, not taken over
        await asyncio.wait_for(runner, timeout=10)
    assert isinstance(info.value.__cause__, BackendUnavailableError)
    assert isinstance(lease.lost_reason, BackendUnavailableError)
    assert notified == [lease.lost_reason]


async def test_run_returns_the_producers_result_while_the_lease_holds(
    stores: MemoryStores, key: ConversationKey
):
    lease = await claim(stores, key, USER, "m1", lease_config=FAST)

    async def produce() -> int:
        await lease.record(1, "a")
        return 7

    assert await lease.run(produce()) == 7
    await lease.seal("done")
    assert lease.status == "sealed"


async def test_turn_that_raises_inside_the_lease_is_sealed_errored(
    stores: MemoryStores, key: ConversationKey
):
    lease = await claim(stores, key, USER, "m1", lease_config=FAST)
    with pytest.raises(RuntimeError):
        async with lease:
            raise RuntimeError("agent crashed")
    row = (await stores.supervision.read(key, USER)).row
    assert row is not None and row.status == "errored"


async def test_start_turn_claims_before_checking_the_tail(
    stores: MemoryStores, key: ConversationKey
):
    first = await start_turn(stores, key, USER, "a1", None, user_message=Message("u1", "user", 1))
    # The tail is wrong AND the turn is busy: the claim comes first, so BusyError.
    with pytest.raises(BusyError):
        await start_turn(stores, key, USER, "a2", "nope")
    await first.append([Message("a1", "assistant", 2)], expected_tail="u1")
    await first.seal("done")
    with pytest.raises(StaleWriteError) as info:
        await start_turn(stores, key, USER, "a2", "u1", user_message=Message("u2", "user", 3))
    assert not isinstance(info.value, BusyError)
    assert info.value.context["tail"] == "a1"
    # The lease was released: the row is gone, and nothing was appended.
    assert (await stores.supervision.read(key, USER)).row is None
    assert [m.id for m in await stores.conversations.read_messages(key, USER)] == ["u1", "a1"]
    lease = await start_turn(stores, key, USER, "a2", "a1", user_message=Message("u2", "user", 3))
    assert lease.epoch > first.epoch


async def test_drop_recording_leaves_a_successors_recording(
    stores: MemoryStores, key: ConversationKey
):
    old = await claim(stores, key, USER, "m1")
    await old.record(1, "a")
    new = await claim(stores, key, USER, "m1")
    await new.record(2, "ab")
    assert not await old.drop_recording()
    assert (await stores.recording.read(key, USER)) is not None
    assert await new.drop_recording()
    assert (await stores.recording.read(key, USER)) is None


async def test_claim_on_an_erased_conversation_raises_erased(
    stores: MemoryStores, key: ConversationKey
):
    lease = await start_turn(stores, key, USER, "a1", None, user_message=Message("u1", "user", 1))
    assert await stores.conversations.delete(key, USER)
    with pytest.raises(ErasedError):
        await claim(stores, key, USER, "a2")
    with pytest.raises(LeaseLostError):
        await lease.heartbeat_once()


async def test_claim_gives_up_after_bounded_races(stores: MemoryStores, key: ConversationKey):
    """A store where every compare-and-swap loses must end in ConflictError, not spin."""

    class AlwaysLoses(MemorySupervisionStore):
        async def _compare_and_swap(self, key, principal, expected_epoch, row):  # type: ignore[no-untyped-def]
            return False

    stores.supervision = AlwaysLoses(stores.data)
    await stores.state.save(key, USER, {"claimed": "key"})
    with pytest.raises(ConflictError):
        await claim(stores, key, USER, "m1", lease_config=LeaseConfig(claim_attempts=3))


def test_config_rejects_a_heartbeat_slower_than_death():
    from agentstores.errors import UsageError

    with pytest.raises(UsageError):
        LeaseConfig(dead_after=1.0, heartbeat_interval=1.0)


async def test_cancelling_the_producer_stops_the_heartbeat(
    stores: MemoryStores, key: ConversationKey
):
    lease = await claim(stores, key, USER, "m1", lease_config=FAST)
    runner = asyncio.create_task(lease.run(asyncio.Event().wait()))
    for _ in range(1000):
        if lease.heartbeats >= 2:
            break
        await asyncio.sleep(0.01)
    assert lease.heartbeats >= 2
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    beats = lease.heartbeats
    await asyncio.sleep(FAST.heartbeat_interval * 5)
    assert lease.heartbeats == beats
    assert not lease.lost.is_set()


async def test_run_and_the_context_fence_plain_writes_with_the_lease_epoch(
    stores: MemoryStores, key: ConversationKey
):
    from agentstores.stores.ambient import ambient_epoch

    first = await claim(stores, key, USER, "m1", lease_config=FAST)

    async def producer() -> int | None:
        return ambient_epoch(key)

    assert await first.run(producer()) == first.epoch
    assert ambient_epoch(key) is None  # only the producer's task carried it
    async with first:
        assert ambient_epoch(key) == first.epoch
    assert ambient_epoch(key) is None

    second = await claim(stores, key, USER, "m1", lease_config=FAST)  # a resume fences the first
    async with first:
        with pytest.raises(FencedError):
            await stores.state.save(key, USER, {"late": True})
    assert await stores.state.load(key, USER) == {}
    await second.release()


async def test_a_takeover_of_the_same_turn_accepts_its_own_user_message_as_tail(
    stores: MemoryStores, key: ConversationKey
):
    question = Message("q1", "user", "hi")
    first = await start_turn(
        stores, key, USER, "a1", None, user_message=question, lease_config=FAST
    )
    # The producer dies; its successor retries the very same turn with the same tail.
    second = await start_turn(
        stores, key, USER, "a1", None, user_message=question, lease_config=FAST
    )
    assert second.epoch > first.epoch and second.reason == "resume"
    assert [m.id for m in await stores.conversations.read_messages(key, USER)] == ["q1"]
    with pytest.raises(StaleWriteError):
        await start_turn(
            stores,
            key,
            USER,
            "a1",
            None,
            user_message=Message("q2", "user", "x"),
            lease_config=FAST,
        )
    await second.release()
