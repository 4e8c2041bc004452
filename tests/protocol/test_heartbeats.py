"""Coalesced heartbeats: many leases of a process beat in shared batches, each lease still
learning its own outcome (on the in-memory reference backend)."""

from __future__ import annotations

import asyncio

import pytest

from agentstores.errors import (
    BackendUnavailableError,
    HeartbeatTimeoutError,
    LeaseLostError,
    NotOwnedError,
)
from agentstores.keys import ConversationKey
from agentstores.memory.stores import MemoryStores
from agentstores.models import SupervisionRow, Swap, SwapOutcome
from agentstores.protocol import HeartbeatCoalescer, LeaseConfig, claim
from agentstores.protocol.heartbeats import coalescer_for
from agentstores.protocol.ticker import ticker_for
from agentstores.stores import SupervisionStore

USER = "alice"
FAST = LeaseConfig(dead_after=0.5, heartbeat_interval=0.05)


class CountingStore:
    """Wraps a supervision store, recording each batch it is sent (a spy, not a stub: every
    call goes to the real store)."""

    max_batches_in_flight = 2

    def __init__(self, inner: SupervisionStore) -> None:
        self.inner = inner
        self.batches: list[int] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()
        """Set once a batch has reached the store."""

    async def compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
        self.batches.append(len(swaps))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        return await self.inner.compare_and_swap_many(swaps)


def _keys(n: int, tenant: str = "hb") -> list[ConversationKey]:
    return [ConversationKey(tenant, f"k{i}") for i in range(n)]


async def test_beats_waiting_while_a_batch_is_in_flight_share_the_next(stores: MemoryStores):
    keys = _keys(40)
    for k in keys:
        assert await stores.supervision.compare_and_swap(
            k, USER, None, SupervisionRow("running", "m", 1)
        )
    spy = CountingStore(stores.supervision)
    spy.gate = asyncio.Event()
    co = HeartbeatCoalescer(spy, max_in_flight=1)  # type: ignore[arg-type]
    row = SupervisionRow("running", "m", 1)
    first = asyncio.create_task(co.beat(Swap(keys[0], USER, 1, row)))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(co.beat(Swap(k, USER, 1, row))) for k in keys[1:]]
    await asyncio.sleep(0)
    spy.gate.set()
    outcomes = await asyncio.gather(first, *rest)
    assert all(o.swapped and o.error is None for o in outcomes)
    assert spy.batches == [1, 39], "beats arriving during a batch must ride one next batch"
    assert co.batches == 2


async def test_a_beat_cancelled_after_it_was_sent_waits_for_its_batch(stores: MemoryStores):
    """Stopping a heartbeat whose beat is in flight returns only once that batch has
    settled, so a seal written next cannot be overwritten by the late beat."""
    (key,) = _keys(1, "late")
    sup = stores.supervision
    assert await sup.compare_and_swap(key, USER, None, SupervisionRow("running", "m", 1))
    spy = CountingStore(sup)
    spy.gate = asyncio.Event()
    co = HeartbeatCoalescer(spy)  # type: ignore[arg-type]
    beat = asyncio.create_task(co.beat(Swap(key, USER, 1, SupervisionRow("running", "m", 1))))
    await spy.entered.wait()  # the batch is on its way to the store
    beat.cancel()
    await asyncio.sleep(0)
    assert not beat.done(), "the cancelled beat must wait for the batch it went out with"
    spy.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await beat
    assert await sup.compare_and_swap(key, USER, 1, SupervisionRow("done", "m", 1))
    row = (await sup.read(key, USER)).row
    assert row is not None and row.status == "done", "a late beat undid the seal"


async def test_a_beat_cancelled_before_it_was_sent_is_withdrawn(stores: MemoryStores):
    key, other = _keys(2, "early")
    sup = stores.supervision
    for k in (key, other):
        assert await sup.compare_and_swap(k, USER, None, SupervisionRow("running", "m", 1))
    spy = CountingStore(sup)
    spy.gate = asyncio.Event()
    co = HeartbeatCoalescer(spy, max_in_flight=1)  # type: ignore[arg-type]
    row = SupervisionRow("running", "m", 1)
    first = asyncio.create_task(co.beat(Swap(other, USER, 1, row)))
    await spy.entered.wait()
    waiting = asyncio.create_task(co.beat(Swap(key, USER, 1, row)))  # queued behind it
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    spy.gate.set()
    assert await first == SwapOutcome(True)
    assert spy.batches == [1], "the withdrawn beat must not be sent"


async def test_each_beat_gets_its_own_outcome(stores: MemoryStores):
    mine, theirs, moved = _keys(3)
    sup = stores.supervision
    assert await sup.compare_and_swap(mine, USER, None, SupervisionRow("running", "m", 1))
    assert await sup.compare_and_swap(theirs, "bob", None, SupervisionRow("running", "m", 1))
    assert await sup.compare_and_swap(moved, USER, None, SupervisionRow("running", "m", 2))
    co = HeartbeatCoalescer(sup)
    row = SupervisionRow("running", "m", 1)
    a, b, c = await asyncio.gather(
        co.beat(Swap(mine, USER, 1, row)),
        co.beat(Swap(theirs, USER, 1, row)),
        co.beat(Swap(moved, USER, 1, row)),
    )
    assert a == SwapOutcome(True)
    assert isinstance(b.error, NotOwnedError)
    assert c == SwapOutcome(False)


async def test_two_beats_on_one_key_never_share_a_batch(stores: MemoryStores):
    (key,) = _keys(1)
    assert await stores.supervision.compare_and_swap(
        key, USER, None, SupervisionRow("running", "m", 1)
    )
    spy = CountingStore(stores.supervision)
    co = HeartbeatCoalescer(spy, max_in_flight=1)  # type: ignore[arg-type]
    row = SupervisionRow("running", "m", 1)
    outcomes = await asyncio.gather(*(co.beat(Swap(key, USER, 1, row)) for _ in range(3)))
    assert [o.swapped for o in outcomes] == [True, True, True]
    assert spy.batches == [1, 1, 1]


async def test_a_failed_batch_fails_every_beat_in_it(stores: MemoryStores):
    class Failing(CountingStore):
        async def compare_and_swap_many(self, swaps: list[Swap]) -> list[SwapOutcome]:
            raise BackendUnavailableError("down")

    keys = _keys(3)
    co = HeartbeatCoalescer(Failing(stores.supervision))  # type: ignore[arg-type]
    row = SupervisionRow("running", "m", 1)
    results = await asyncio.gather(
        *(co.beat(Swap(k, USER, 1, row)) for k in keys), return_exceptions=True
    )
    assert all(isinstance(r, BackendUnavailableError) for r in results)
    # and the coalescer keeps working afterwards
    assert co._in_flight == 0


async def test_leases_of_a_process_beat_through_one_coalescer(stores: MemoryStores):
    keys = _keys(12)
    leases = [await claim(stores, k, USER, "m", lease_config=FAST) for k in keys]
    spy = CountingStore(stores.supervision)
    co = coalescer_for(stores.supervision)
    assert coalescer_for(stores.supervision) is co, "one coalescer per store and loop"
    co.store = spy  # type: ignore[assignment]
    for lease in leases:
        lease.start_heartbeat()
    for _ in range(600):  # until every lease beat three times (30 s at most)
        if min(lease.heartbeats for lease in leases) >= 3:
            break
        await asyncio.sleep(FAST.heartbeat_interval)
    for lease in leases:
        await lease.stop_heartbeat()
    beats = sum(lease.heartbeats for lease in leases)
    # a beat stopped while its batch was in flight was sent but not counted
    assert beats <= sum(spy.batches) <= beats + len(leases)
    assert all(not lease.lost.is_set() for lease in leases)


async def test_a_lease_taken_over_learns_it_on_its_next_beat(stores: MemoryStores):
    keys = _keys(6)
    leases = [await claim(stores, k, USER, "m", lease_config=FAST) for k in keys]
    for lease in leases:
        lease.start_heartbeat()
    await asyncio.sleep(FAST.heartbeat_interval * 2)
    victim = leases[2]
    newer = await claim(stores, victim.key, USER, "m", lease_config=FAST)  # a resume fences it
    await asyncio.wait_for(victim.lost.wait(), timeout=FAST.heartbeat_interval * 4)
    with pytest.raises(LeaseLostError):
        victim.check()
    await asyncio.sleep(FAST.heartbeat_interval * 2)
    others = [lease for lease in leases if lease is not victim]
    assert all(not lease.lost.is_set() for lease in others)
    for lease in leases:
        await lease.stop_heartbeat()
    assert newer.epoch > victim.epoch


async def test_coalescing_can_be_turned_off(stores: MemoryStores):
    (key,) = _keys(1)
    config = LeaseConfig(dead_after=0.5, heartbeat_interval=0.05, coalesce=False)
    lease = await claim(stores, key, USER, "m", lease_config=config)
    await lease.heartbeat_once()
    assert lease.heartbeats == 1
    assert coalescer_for(stores.supervision).batches == 0


async def test_running_heartbeats_spread_over_the_interval_one_timer_per_slot(
    stores: MemoryStores,
):
    """Leases claimed together beat at their own phase of the interval, and the loop runs
    one ticker timer per occupied slot, not one timer per lease."""
    config = LeaseConfig(dead_after=1.5, heartbeat_interval=0.5)
    leases = [await claim(stores, k, USER, "m", lease_config=config) for k in _keys(200, "spread")]
    spy = CountingStore(stores.supervision)
    coalescer_for(stores.supervision).store = spy  # type: ignore[assignment]
    ticker = ticker_for(asyncio.get_running_loop())
    fired = ticker.fired
    for lease in leases:
        lease.start_heartbeat()
    for _ in range(600):  # until every lease beat twice (30 s at most)
        if min(lease.heartbeats for lease in leases) >= 2:
            break
        await asyncio.sleep(0.05)
    for lease in leases:
        await lease.stop_heartbeat()
    beats = sum(lease.heartbeats for lease in leases)
    assert beats >= 400
    assert max(spy.batches) < len(leases) / 2, "the leases' beats went out together"
    assert ticker.fired - fired < beats / 2, "the ticker ran about a timer per beat"


async def test_stopping_a_heartbeat_waits_for_its_beat_in_flight(stores: MemoryStores):
    """The lease path of the race fixed in the coalescer: a seal right after stopping the
    heartbeat is never undone by the beat that was on its way."""
    (key,) = _keys(1, "stop")
    lease = await claim(stores, key, USER, "m", lease_config=FAST)
    spy = CountingStore(stores.supervision)
    spy.gate = asyncio.Event()
    coalescer_for(stores.supervision).store = spy  # type: ignore[assignment]
    lease.start_heartbeat()
    await spy.entered.wait()
    stopping = asyncio.create_task(lease.stop_heartbeat())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not stopping.done(), "stopping returned while a beat was on its way"
    spy.gate.set()
    await stopping
    coalescer_for(stores.supervision).store = stores.supervision
    await lease.seal()
    row = (await stores.supervision.read(key, USER)).row
    assert row is not None and row.status == "done", "a late beat undid the seal"
    assert spy.batches == [1]


@pytest.mark.parametrize("limit", [0.15, 0.12], ids=["whole-intervals", "between-ticks"])
async def test_a_beat_unanswered_past_its_timeout_loses_the_lease(
    stores: MemoryStores, limit: float
):
    """A store that never answers: the lease is lost with TimeoutError, its producer is
    cancelled, and no second beat piles up behind the first meanwhile."""
    (key,) = _keys(1, f"hang{limit}")
    config = LeaseConfig(dead_after=0.5, heartbeat_interval=0.05, heartbeat_timeout=limit)
    lease = await claim(stores, key, USER, "m", lease_config=config)
    spy = CountingStore(stores.supervision)
    spy.gate = asyncio.Event()
    coalescer_for(stores.supervision).store = spy  # type: ignore[assignment]
    producer = asyncio.create_task(asyncio.Event().wait())
    lease.bind(producer)
    lease.start_heartbeat()
    await asyncio.wait_for(lease.lost.wait(), timeout=30)
    assert isinstance(lease.lost_reason, TimeoutError)
    with pytest.raises(HeartbeatTimeoutError):  # told apart from a takeover by its type
        lease.check()
    await lease.stop_heartbeat()  # returns: the beat out has timed out
    with pytest.raises(asyncio.CancelledError):
        await producer
    assert spy.batches == [1], "a second beat was sent while the first was unanswered"
    spy.gate.set()


async def test_a_beat_falling_due_while_the_last_is_out_goes_once_it_is_answered(
    stores: MemoryStores,
):
    (key,) = _keys(1, "owed")
    config = LeaseConfig(dead_after=3.0, heartbeat_interval=0.05)
    lease = await claim(stores, key, USER, "m", lease_config=config)
    spy = CountingStore(stores.supervision)
    spy.gate = asyncio.Event()
    coalescer_for(stores.supervision).store = spy  # type: ignore[assignment]
    lease.start_heartbeat()
    await spy.entered.wait()
    await asyncio.sleep(config.heartbeat_interval * 4)  # several beats fall due meanwhile
    assert spy.batches == [1]
    spy.gate.set()
    for _ in range(600):
        if lease.heartbeats >= 3:
            break
        await asyncio.sleep(0.01)
    await lease.stop_heartbeat()
    assert lease.heartbeats >= 3 and not lease.lost.is_set()
    assert all(n == 1 for n in spy.batches)


async def test_a_running_heartbeat_without_coalescing_calls_the_store_per_beat(
    stores: MemoryStores,
):
    (key,) = _keys(1, "single")
    config = LeaseConfig(dead_after=0.5, heartbeat_interval=0.05, coalesce=False)
    lease = await claim(stores, key, USER, "m", lease_config=config)
    beat = lease.start_heartbeat()
    for _ in range(600):
        if lease.heartbeats >= 3:
            break
        await asyncio.sleep(0.01)
    await lease.stop_heartbeat()
    assert beat.done() and lease.heartbeats >= 3 and not lease.lost.is_set()
    assert coalescer_for(stores.supervision).batches == 0
