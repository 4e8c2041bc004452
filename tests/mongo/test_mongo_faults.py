"""Faults on nx-27017: replies lost after the server applied a write (through a TCP proxy),
the server SIGKILLed and restarted under running calls, an exhausted pool, no server.

A lost reply to a commit is settled by reading the header's writer nonce back (or
the claimer's nonce on a token); one the header has moved past is raised as
``UnknownOutcomeError``, never reported as success. Nothing a write left uncommitted
is ever read.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest

from agentstores.errors import (
    AlreadyClaimedError,
    BackendUnavailableError,
    UnknownOutcomeError,
)
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores_mongo.stores import MongoStores
from tests.servers.mongo import Installation, NxServer, free_port, with_option

from .faultproxy import FaultProxy

P = "p"
pytestmark = pytest.mark.timeout(180)


def _key() -> ConversationKey:
    return ConversationKey("faults", uuid.uuid4().hex)


@pytest.fixture
def nx_installed(nx_server: NxServer) -> AsyncIterator[Installation]:
    with Installation(nx_server.url) as inst:
        yield inst


@asynccontextmanager
async def _proxied(
    nx_server: NxServer, inst: Installation, **options: object
) -> AsyncIterator[tuple[FaultProxy, MongoStores]]:
    proxy = await FaultProxy("127.0.0.1", nx_server.port).start()
    url = with_option(proxy.url(), "collection_prefix", inst.prefix)
    stores = MongoStores(url, **options)
    try:
        async with stores:
            yield proxy, stores
    finally:
        await proxy.close()


async def test_lost_replies_after_commit_are_reconciled(
    nx_server: NxServer, nx_installed: Installation
) -> None:
    keys = f"{nx_installed.prefix}keys"
    key = _key()
    async with _proxied(nx_server, nx_installed) as (proxy, stores):
        sup, conv = stores.supervision, stores.conversations
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        cut = proxy.cut_reply_to("update", keys)
        assert await sup.compare_and_swap(key, P, 1, SupervisionRow("running", "a", 2))
        assert cut.is_set()
        row = (await sup.read(key, P)).row
        assert row is not None and row.epoch == 2

        await conv.append_messages(key, P, [Message("w", "user", "warm")])
        cut = proxy.cut_reply_to("update", keys)
        stored = await conv.append_messages(
            key, P, [Message("x", "assistant", "one"), Message("y", "user", "two")]
        )
        assert cut.is_set()
        assert [(m.id, m.seq) for m in stored] == [("x", 1), ("y", 2)]
        assert [m.id for m in await conv.read_messages(key, P)] == ["w", "x", "y"]

        cut = proxy.cut_reply_to("update", keys)
        await stores.state.save(key, P, {"n": 1}, epoch=2)
        assert cut.is_set()
        assert await stores.state.load(key, P) == {"n": 1}

        cut = proxy.cut_reply_to("update", keys)
        assert await stores.recording.put(key, P, RecordedEvent(3, {"text": "abc"}, "a", 2))
        assert cut.is_set()
        recorded = await stores.recording.read(key, P)
        assert recorded is not None and recorded.index == 3

        expires = await stores.now() + timedelta(minutes=5)
        cut = proxy.cut_reply_to("update", keys)
        await stores.pause_tokens.put("t1", key, P, "one", expires)
        assert cut.is_set()
        await stores.state.save(key, P, {"n": 2})  # finishes the put's redo (marks it ok)
        cut = proxy.cut_reply_to("update", f"{nx_installed.prefix}tokens")
        assert await stores.pause_tokens.claim("t1", key, P) == "one"
        assert cut.is_set()
        with pytest.raises(AlreadyClaimedError):
            await stores.pause_tokens.claim("t1", key, P)


async def test_a_commit_landing_inside_its_reconciliation_is_reported_done(
    nx_server: NxServer, nx_installed: Installation
) -> None:
    """A commit held in the network while its client gave up on it, read the header back
    (no trace yet) and bumped the header so the commit could never land: the bump names
    the rev it read, so when the late commit lands first the bump misses, the next read
    finds the commit's nonce, and the write is reported done. A bump made blind would
    step over the landed commit and report it lost: the claimer's retry would find the
    lease taken (by itself) and say so, the token's put would find its token present.
    The bump names the key too: a sibling stored before it, at the same rev, is left
    alone (bumped instead, the commit would be reported lost the same way)."""
    keys = f"{nx_installed.prefix}keys"
    key, sibling = _key(), _key()
    async with _proxied(nx_server, nx_installed) as (proxy, stores):
        sup = stores.supervision
        for k in (sibling, key):  # both headers at rev 1, the sibling's stored first
            await stores.conversations.append_messages(k, P, [Message("a", "user", 0)])
        landed = proxy.deliver_late("update", keys)
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        assert landed.is_set()
        row = (await sup.read(key, P)).row
        assert row is not None and (row.epoch, row.message_id) == (1, "a")

        expires = await stores.now() + timedelta(minutes=5)
        landed = proxy.deliver_late("update", keys)
        await stores.pause_tokens.put("t1", key, P, "one", expires, epoch=1)
        assert landed.is_set()
        assert await stores.pause_tokens.claim("t1", key, P) == "one"


async def test_a_dead_writers_leftovers_are_cleared_and_nothing_else(
    nx_server: NxServer, nx_installed: Installation
) -> None:
    """A writer that died between inserting its messages and committing them leaves
    documents in the next writer's way. Once retired they are garbage, and each is
    deleted by its ``_id`` (and the rev it was written at): other keys' committed
    messages written at the same rev stay, and the dead writer's messages are never
    read. Retiring the dead writer bumps this key's header alone: a sibling at the same
    rev, stored first, keeps its rev (bumped, its next writer would lose a race to
    nobody)."""
    keys = f"{nx_installed.prefix}keys"
    others = [_key() for _ in range(3)]
    sibling, key = _key(), _key()
    async with (
        _proxied(nx_server, nx_installed) as (proxy, dying),
        MongoStores(nx_installed.url, stall_after=0.2) as live,
    ):
        conv = live.conversations
        for other in others:  # committed messages at revs 0 and 1, stored before the leftovers
            await conv.append_messages(other, P, [Message(f"{other.session_id}-a", "user", 1)])
            await conv.append_messages(other, P, [Message(f"{other.session_id}-b", "user", 2)])
        await conv.append_messages(sibling, P, [Message("first", "user", 0)])
        await conv.append_messages(key, P, [Message("first", "user", 0)])  # both at rev 1
        stalled = proxy.stall_request_to("update", keys)
        doomed = [Message(f"dead-{i}", "assistant", i) for i in range(3)]
        call = asyncio.ensure_future(dying.conversations.append_messages(key, P, doomed))
        await asyncio.wait_for(stalled.wait(), 30)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        proxy.release.set()

        stored = await conv.append_messages(key, P, [Message("next", "user", 3)])
        assert [(m.id, m.seq) for m in stored] == [("next", 1)]
        assert [m.id for m in await conv.read_messages(key, P)] == ["first", "next"]
        for other in others:
            assert [m.id for m in await conv.read_messages(other, P)] == [
                f"{other.session_id}-a",
                f"{other.session_id}-b",
            ], "a dead writer's clean-up deleted another key's message"
        header = await live.ctx.keys.find_one({"_id": sibling.storage_name})
        assert header["rev"] == 1, "retiring a dead writer bumped another key's header"


async def test_a_lost_swap_reply_outlives_commits_that_leave_the_row(
    nx_server: NxServer, nx_installed: Installation
) -> None:
    """The swap's nonce rides in the row (``sup.w``): later commits that leave the row
    alone do not erase the evidence, so the lost reply is settled as landed."""
    key = _key()
    async with (
        _proxied(nx_server, nx_installed) as (proxy, stores),
        MongoStores(nx_installed.url) as other,
    ):
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        held = proxy.hold_then_cut_reply_to("update", f"{nx_installed.prefix}keys")
        call = asyncio.ensure_future(
            sup.compare_and_swap(key, P, 1, SupervisionRow("running", "b", 2))
        )
        await asyncio.wait_for(held.wait(), 30)
        for index in (1, 2):  # two more commits, neither touching the row
            assert await other.recording.put(key, P, RecordedEvent(index, {"i": index}, "b", 2))
        proxy.release.set()
        assert await call
        row = (await sup.read(key, P)).row
        assert row is not None and (row.epoch, row.message_id) == (2, "b")


async def test_a_lost_reply_the_row_moved_past_is_unknown(
    nx_server: NxServer, nx_installed: Installation
) -> None:
    key = _key()
    async with (
        _proxied(nx_server, nx_installed) as (proxy, stores),
        MongoStores(nx_installed.url) as other,
    ):
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        held = proxy.hold_then_cut_reply_to("update", f"{nx_installed.prefix}keys")
        call = asyncio.ensure_future(
            sup.compare_and_swap(key, P, 1, SupervisionRow("running", "b", 2))
        )
        await asyncio.wait_for(held.wait(), 30)
        # another writer's heartbeat at the new epoch rewrites the row: the nonce is gone
        assert await other.supervision.compare_and_swap(
            key, P, 2, SupervisionRow("running", "c", 2)
        )
        proxy.release.set()
        with pytest.raises(UnknownOutcomeError):
            await call
        row = (await sup.read(key, P)).row
        assert row is not None and row.epoch == 2  # it landed; nobody claimed it did


async def test_a_lost_heartbeat_reply_is_settled_by_swapping_again(
    nx_server: NxServer, nx_installed: Installation
) -> None:
    """A swap at the same epoch (a heartbeat, a seal) whose reply was lost and whose nonce
    later commits overwrote is not an unknown outcome: it writes the same row, so the
    general path swaps again and says whether the row is still this epoch's."""
    key = _key()
    async with (
        _proxied(nx_server, nx_installed) as (proxy, stores),
        MongoStores(nx_installed.url) as other,
    ):
        sup = stores.supervision
        assert await sup.compare_and_swap(key, P, None, SupervisionRow("running", "a", 1))
        for step, (row, then) in enumerate(
            (
                (SupervisionRow("running", "a", 1), None),
                (SupervisionRow("done", "a", 1), None),
                (SupervisionRow("running", "a", 1), SupervisionRow("running", "b", 2)),
            )
        ):
            if then is not None:  # sealed above: start a running row again
                assert await other.supervision.compare_and_swap(
                    key, P, 1, SupervisionRow("running", "a", 1)
                )
            held = proxy.hold_then_cut_reply_to("update", f"{nx_installed.prefix}keys")
            call = asyncio.ensure_future(sup.compare_and_swap(key, P, 1, row))
            await asyncio.wait_for(held.wait(), 30)
            for index in (2 * step + 1, 2 * step + 2):  # the nonce is gone from the header
                event = RecordedEvent(index, {"i": index}, "a", 1)
                assert await other.recording.put(key, P, event)
            if then is not None:  # and a takeover: the swap must now lose
                assert await other.supervision.compare_and_swap(key, P, 1, then)
            proxy.release.set()
            assert await call is (then is None)
            stored = (await sup.read(key, P)).row
            want = then or row
            assert stored is not None
            assert (stored.status, stored.message_id, stored.epoch) == (
                want.status,
                want.message_id,
                want.epoch,
            )


async def test_an_exhausted_pool_fails_clearly_and_recovers(
    nx_server: NxServer, nx_installed: Installation
) -> None:
    key = _key()
    proxy = await FaultProxy("127.0.0.1", nx_server.port).start()
    url = with_option(proxy.url(), "collection_prefix", nx_installed.prefix)
    url = with_option(url, "maxPoolSize", "1")
    url = with_option(url, "waitQueueTimeoutMS", "300")
    try:
        async with MongoStores(url) as stores:
            conv = stores.conversations
            await conv.append_messages(key, P, [Message("m", "user", "hi")])
            held = proxy.hold_reply_to("find", f"{nx_installed.prefix}keys")
            busy = asyncio.ensure_future(conv.get_conversation(key, P))
            await asyncio.wait_for(held.wait(), 30)
            with pytest.raises(BackendUnavailableError, match="no free MongoDB connection") as info:
                await conv.get_conversation(key, P)
            assert not isinstance(info.value, UnknownOutcomeError)
            proxy.release.set()
            first = await busy
            assert first is not None and first.message_count == 1
            again = await conv.get_conversation(key, P)
            assert again is not None and again.message_count == 1
    finally:
        await proxy.close()


async def test_no_server_is_backend_unavailable_quickly() -> None:
    url = f"mongodb://127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=500"
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError):
        await MongoStores(url).open()
    assert time.monotonic() - started < 30


async def _append_until_done(
    stores: MongoStores, key: ConversationKey, batch: list[Message], deadline: float
) -> int:
    """Append ``batch``, resending after every fault the adapter reports (appends are
    idempotent by id; most faults it resends by itself); returns how many it reported."""
    faults = 0
    while True:
        try:
            await stores.conversations.append_messages(key, P, batch)
            return faults
        except BackendUnavailableError:  # UnknownOutcomeError included
            faults += 1
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def test_server_killed_and_restarted_under_running_appends() -> None:
    with NxServer() as server, Installation(server.url) as inst:
        asyncio.run(_appends_across_restarts(server, inst))


async def _appends_across_restarts(server: NxServer, inst: Installation) -> None:
    """Four writers append batches until both restarts are behind them (at least
    ``batches`` each): each restart waits for a few appends since the last one, so it
    always lands among running calls, however fast or slow the machine."""
    url = with_option(inst.url, "serverSelectionTimeoutMS", "2000")
    key = _key()
    writers, batches = 4, 15
    in_flight: set[int] = set()
    hit: list[int] = []
    appended = [0] * writers
    restarted = asyncio.Event()
    progress = asyncio.Condition()
    async with MongoStores(url) as stores:
        deadline = time.monotonic() + 120

        async def writer(w: int) -> int:
            faults = 0
            while appended[w] < batches or not restarted.is_set():
                b = appended[w]
                batch = [Message(f"w{w}-b{b}-{i}", "user", [b, i]) for i in range(3)]
                in_flight.add(w)
                faults += await _append_until_done(stores, key, batch, deadline)
                in_flight.discard(w)
                appended[w] += 1
                async with progress:
                    progress.notify_all()
            return faults

        tasks = [asyncio.ensure_future(writer(w)) for w in range(writers)]
        for _ in range(2):
            since = sum(appended)
            async with progress:
                await progress.wait_for(lambda: sum(appended) >= since + 5)  # noqa: B023
            hit.append(len(in_flight))
            await asyncio.to_thread(server.restart, crash=True)
        restarted.set()
        sum(await asyncio.gather(*tasks))
        messages = await stores.conversations.read_messages(key, P)
    ids = [m.id for m in messages]
    expected = {
        f"w{w}-b{b}-{i}" for w in range(writers) for b in range(appended[w]) for i in range(3)
    }
    assert len(ids) == len(set(ids)), "a message landed twice"
    assert set(ids) == expected, "a message was lost"
    assert [m.seq for m in messages] == list(range(len(ids)))
    for w in range(writers):
        mine = [m.content for m in messages if m.id.startswith(f"w{w}-")]
        assert mine == sorted(mine), "a writer's messages are out of order"  # type: ignore[type-var]
    assert all(hit), f"a restart hit no running call: {hit}"


async def test_a_cancelled_call_is_never_reported_as_done(nx_installed: Installation) -> None:
    """A store call cancelled mid-flight ends cancelled, even when the driver lost the
    cancellation (Python 3.11's ``asyncio.wait_for`` returns the result of a future that
    completed as the cancel arrived, and PyMongo writes through it): a lease whose
    heartbeat swallowed its cancel beat forever and its seal waited for it."""
    key = _key()
    async with MongoStores(nx_installed.url) as stores:
        sup = stores.supervision
        beat = SupervisionRow("running", "a", 1)
        assert await sup.compare_and_swap(key, P, None, beat)
        lost = cancelled = 0
        rng = random.Random(11)
        for _ in range(3000):  # until enough were cancelled mid-flight, however fast calls are
            if cancelled > 150:
                break
            call = asyncio.ensure_future(sup.compare_and_swap(key, P, 1, beat))
            await asyncio.sleep(rng.uniform(0, 0.004))
            if not call.cancel():
                await call
                continue
            cancelled += 1
            try:
                await call
            except asyncio.CancelledError:
                continue
            lost += 1
        assert cancelled > 100, "too few calls were cancelled mid-flight to judge"
        assert lost == 0, f"{lost} of {cancelled} cancellations were lost"
