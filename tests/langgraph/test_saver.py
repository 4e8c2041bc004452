"""What conformance does not test: concurrent puts, a fenced put, ownership, erasure,
the sync API, and the cost of put / latest / list at any thread length."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6

from agentstores import (
    ConversationKey,
    ErasedError,
    FencedError,
    NotOwnedError,
    Stores,
)
from agentstores_langgraph import EPOCH, AgentStoresSaver
from tests.servers.backends import Servers, fresh_tenant

pytestmark = pytest.mark.timeout(120)


def checkpoint(values: dict[str, Any], versions: dict[str, Any]) -> dict[str, Any]:
    return {
        "v": 1,
        "id": str(uuid6(clock_seq=-1)),
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {},
        "pending_sends": [],
        "updated_channels": None,
    }


def config(thread: str, parent: str | None = None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": "", **extra}
    if parent is not None:
        c["checkpoint_id"] = parent
    return {"configurable": c}


async def count(stores: Stores, key: ConversationKey) -> int:
    info = await stores.conversations.get_conversation(key, "alice")
    return 0 if info is None else info.message_count


async def chain(saver: AgentStoresSaver, thread: str, n: int, **extra: Any) -> list[str]:
    """``n`` checkpoints in a row; channel ``a`` changes every step, ``big`` never."""
    ids: list[str] = []
    parent = None
    for i in range(n):
        versions = {"a": i + 1, "big": 1}
        new = {"a": i + 1, "big": 1} if i == 0 else {"a": i + 1}
        cp = checkpoint({"a": f"a{i}", "big": "x" * 1000}, versions)
        stored = await saver.aput(config(thread, parent, **extra), cp, {"step": i}, new)
        parent = stored["configurable"]["checkpoint_id"]
        ids.append(parent)
    return ids


async def test_concurrent_puts_on_one_thread_all_land(
    backend: str, bridge_servers: Servers
) -> None:
    """Eight puts at once from two savers (two workers, each with its own cached tail)."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        saver = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        other = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        cps = [checkpoint({"a": i}, {"a": i + 1}) for i in range(8)]
        await asyncio.gather(
            *(
                (saver if i % 2 else other).aput(config("t"), cp, {"step": i}, {"a": i + 1})
                for i, cp in enumerate(cps)
            )
        )
        listed = [t async for t in saver.alist(config("t"))]
        assert sorted(t.checkpoint["id"] for t in listed) == sorted(cp["id"] for cp in cps)
        for t in listed:
            assert t.checkpoint["channel_values"] == {"a": t.metadata["step"]}
        latest = await saver.aget_tuple(config("t"))
        assert latest is not None and latest.checkpoint["id"] == max(cp["id"] for cp in cps)
        # concurrent put_writes for one checkpoint, twice each: every (task, idx) once
        target = config("t", latest.checkpoint["id"])
        await asyncio.gather(
            *(saver.aput_writes(target, [("ch", f"v{i}")], f"task-{i % 4}") for i in range(8))
        )
        again = await saver.aget_tuple(target)
        assert again is not None
        assert sorted(w[0] for w in again.pending_writes or []) == [f"task-{i}" for i in range(4)]


async def test_a_fenced_put_lands_nothing(backend: str, bridge_servers: Servers) -> None:
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        saver = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        key = ConversationKey(tenant, "t")
        (first,) = await chain(saver, "t", 1, **{EPOCH: 5})
        before = await count(stores, key)
        with pytest.raises(FencedError):
            await saver.aput(
                config("t", first, **{EPOCH: 4}), checkpoint({"a": 1}, {"a": 9}), {}, {"a": 9}
            )
        with pytest.raises(FencedError):
            await saver.aput_writes(config("t", first, **{EPOCH: 4}), [("ch", 1)], "task")
        assert await count(stores, key) == before
        latest = await saver.aget_tuple(config("t"))
        assert latest is not None and latest.checkpoint["id"] == first
        assert latest.pending_writes == []
        # the current epoch, and writes without one (they neither check nor raise), land
        await saver.aput_writes(config("t", first, **{EPOCH: 5}), [("ch", 1)], "task")
        await chain(saver, "t", 1)


async def test_erasing_the_conversation_erases_its_checkpoints(
    backend: str, bridge_servers: Servers
) -> None:
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        saver = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        ids = await chain(saver, "t", 3)
        await saver.aput_writes(config("t", ids[-1]), [("ch", "pending")], "task")
        conv = stores.conversation(ConversationKey(tenant, "t"), "alice")
        assert await conv.delete()
        assert await saver.aget_tuple(config("t")) is None
        assert await saver.aget_tuple(config("t", ids[0])) is None
        assert [t async for t in saver.alist(config("t"))] == []
        assert await stores.conversations.read_messages(conv.key, "alice") == []
        with pytest.raises(ErasedError):
            await chain(saver, "t", 1)
        with pytest.raises(ErasedError):
            await saver.aput_writes(config("t", ids[-1]), [("ch", "late")], "task")
        # delete_thread is the same erasure
        await chain(saver, "u", 2)
        await saver.adelete_thread("u")
        assert await saver.aget_tuple(config("u")) is None
        with pytest.raises(ErasedError):
            await chain(saver, "u", 1)


async def test_an_unshared_principal_sees_no_thread(backend: str, bridge_servers: Servers) -> None:
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        saver = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        ids = await chain(saver, "t", 2)
        mallory = AgentStoresSaver(stores, tenant=tenant, principal="mallory")
        assert await mallory.aget_tuple(config("t")) is None
        assert [t async for t in mallory.alist(config("t"))] == []
        with pytest.raises(NotOwnedError):
            await mallory.aput(config("t"), checkpoint({"a": 1}, {"a": 9}), {}, {"a": 9})
        as_bob = AgentStoresSaver(stores, tenant=tenant, principal="bob")
        assert await as_bob.aget_tuple(config("t")) is None
        await stores.conversation(ConversationKey(tenant, "t"), "alice").share("bob")
        shared = await as_bob.aget_tuple(config("t"))
        assert shared is not None and shared.checkpoint["id"] == ids[-1]
        with pytest.raises(NotOwnedError):
            await as_bob.aput_writes(config("t", ids[-1]), [("ch", 1)], "task")


async def test_sync_methods_from_another_thread(bridge_servers: Servers) -> None:
    async with bridge_servers.open("file") as stores:
        saver = AgentStoresSaver(stores, tenant=fresh_tenant(), principal="alice")
        cp = checkpoint({"a": "v"}, {"a": 1})

        def work() -> Any:
            stored = saver.put(config("t"), cp, {"step": 0}, {"a": 1})
            saver.put_writes(stored, [("ch", 1)], "task")
            return saver.get_tuple(config("t")), list(saver.list(config("t"), limit=5))

        latest, listed = await asyncio.to_thread(work)
        assert latest.checkpoint["channel_values"] == {"a": "v"}
        assert latest.pending_writes == [("task", "ch", 1)]
        assert [t.checkpoint["id"] for t in listed] == [cp["id"]]
        with pytest.raises(asyncio.InvalidStateError):
            saver.get_tuple(config("t"))


class Counting:
    """Counts the conversation store's calls (round trips), position reads and the rows
    read and appended."""

    def __init__(self, stores: Stores) -> None:
        self.calls = 0
        self.reads = 0
        self.rows_read = 0
        self.appended = 0
        store = stores.conversations
        read, append = store.read_messages, store.append_messages
        info = store.get_conversation

        async def counting_info(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await info(*args, **kwargs)

        async def counting_read(*args: Any, **kwargs: Any) -> Any:
            rows = await read(*args, **kwargs)
            self.calls += 1
            self.reads += 1
            self.rows_read += len(rows)
            return rows

        async def counting_append(key: Any, principal: Any, messages: Any, **kwargs: Any) -> Any:
            stored = await append(key, principal, messages, **kwargs)
            self.calls += 1
            self.appended += len(stored)
            return stored

        store.read_messages = counting_read  # type: ignore[method-assign]
        store.append_messages = counting_append  # type: ignore[method-assign]
        store.get_conversation = counting_info  # type: ignore[method-assign]

    def reset(self) -> None:
        self.calls = self.reads = self.rows_read = self.appended = 0


@pytest.mark.parametrize("backend", ["memory", "postgres"], indirect=True)
async def test_costs_do_not_grow_with_the_thread(backend: str, bridge_servers: Servers) -> None:
    """A put appends one row, the checkpoint with its changed channel only, in one call
    (the tail it is conditioned on is the one the saver last saw); getting the latest and
    listing with a limit make the same calls and read the same rows at 40 and at 300
    checkpoints, the latest in one call."""
    async with bridge_servers.open(backend) as stores:
        saver = AgentStoresSaver(stores, tenant=fresh_tenant(), principal="alice")
        counter = Counting(stores)
        seen: dict[int, tuple[int, ...]] = {}
        for n in (40, 300):
            thread = f"t{n}"
            ids = await chain(saver, thread, n)
            counter.reset()
            await saver.aput(
                config(thread, ids[-1]),
                checkpoint({"a": "next", "big": "x" * 1000}, {"a": n + 1, "big": 1}),
                {},
                {"a": n + 1},
            )
            put_cost = (counter.calls, counter.appended)
            counter.reset()
            latest = await saver.aget_tuple(config(thread))
            assert latest is not None and latest.checkpoint["channel_values"]["big"] == "x" * 1000
            get_cost = (counter.calls, counter.reads, counter.rows_read)
            counter.reset()
            listed = [t async for t in saver.alist(config(thread), limit=3)]
            assert len(listed) == 3
            seen[n] = (*put_cost, *get_cost, counter.calls, counter.rows_read)
            cold = AgentStoresSaver(stores, tenant=saver.tenant, principal="alice")
            counter.reset()
            fresh = await cold.aget_tuple(config(thread))
            assert fresh is not None and fresh.checkpoint == latest.checkpoint
            seen[n] += (counter.calls, counter.rows_read)
        assert seen[40][:3] == (1, 1, 1)  # one append of one row: the checkpoint, with "a"
        assert seen[40] == seen[300], seen


async def test_two_savers_extend_one_thread_in_turn(backend: str, bridge_servers: Servers) -> None:
    """Two savers (two workers) take turns on one thread, each with its own cached tail:
    every put lands after the other's, every read sees the other's newest checkpoint
    with the right values, also when the other wrote more than one read from the cached
    tail returns; and an erasure by one is seen by the other."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        one = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        two = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        ids = await chain(one, "t", 2)
        for step, (writer, reader) in enumerate([(two, one), (one, two)] * 2 + [(two, one)]):
            latest = await writer.aget_tuple(config("t"))
            assert latest is not None and latest.checkpoint["id"] == ids[-1]
            version = 10 + step
            cp = checkpoint({"a": f"s{step}", "big": "x" * 1000}, {"a": version, "big": 1})
            stored = await writer.aput(config("t", ids[-1]), cp, {"step": step}, {"a": version})
            ids.append(stored["configurable"]["checkpoint_id"])
            seen = await reader.aget_tuple(config("t"))
            assert seen is not None and seen.checkpoint["id"] == ids[-1]
            assert seen.checkpoint["channel_values"] == {"a": f"s{step}", "big": "x" * 1000}
        assert await one.aget_tuple(config("t")) is not None  # one's tail is now cached
        ids = await chain(two, "t", 40)  # 80 rows: more than one read from a cached tail
        assert (await one.aget_tuple(config("t"))).checkpoint["id"] == ids[-1]  # type: ignore[union-attr]
        cp = checkpoint({"a": "last", "big": "x" * 1000}, {"a": 99, "big": 1})
        await one.aput(config("t", ids[-1]), cp, {}, {"a": 99})
        latest = await two.aget_tuple(config("t"))
        assert latest is not None and latest.checkpoint["channel_values"]["a"] == "last"
        assert latest.parent_config["configurable"]["checkpoint_id"] == ids[-1]  # type: ignore[index]
        await two.adelete_thread("t")
        assert await one.aget_tuple(config("t")) is None
        with pytest.raises(ErasedError):
            await one.aput(config("t", cp["id"]), checkpoint({"a": 1}, {"a": 100}), {}, {"a": 100})


async def test_from_url_opens_the_backend_and_sees_the_same_thread(bridge_servers: Servers) -> None:
    url = bridge_servers.url("file")
    tenant = fresh_tenant()
    async with AgentStoresSaver.from_url(url, tenant=tenant, principal="alice") as saver:
        (stored,) = await chain(saver, "t", 1)
    async with AgentStoresSaver.from_url(url, tenant=tenant, principal="alice") as again:
        latest = await again.aget_tuple(config("t"))
        assert latest is not None and latest.checkpoint["id"] == stored


async def test_a_saver_whose_cache_holds_nothing_reads_every_time(bridge_servers: Servers) -> None:
    """Tails bigger than the cache's budget are not kept: every put and read goes to the
    store (the tail first), with the same results."""
    from agentstores_langgraph.log import TailCache

    async with bridge_servers.open("memory") as stores:
        saver = AgentStoresSaver(stores, tenant=fresh_tenant(), principal="alice")
        saver._tails = TailCache(budget=100)
        ids = await chain(saver, "t", 5)
        counter = Counting(stores)
        latest = await saver.aget_tuple(config("t"))
        assert latest is not None and latest.checkpoint["id"] == ids[-1]
        assert latest.checkpoint["channel_values"] == {"a": "a4", "big": "x" * 1000}
        assert counter.calls >= 3  # the length, the tail, the unchanged value
        assert saver._tails.held == 0


async def test_a_thread_written_with_blob_rows_is_read_and_extended(
    bridge_servers: Servers,
) -> None:
    """Threads written before a checkpoint row held its own values have a blob row per
    changed channel, which ``locs`` point at: they are read, listed and extended as
    before, and a new checkpoint finds an unchanged value in a blob row."""
    from agentstores import Message
    from agentstores_langgraph.rows import OWN_ROWS, blob_message, checkpoint_message, pack

    async with bridge_servers.open("memory") as stores:
        saver = AgentStoresSaver(stores, tenant=fresh_tenant(), principal="alice")
        key = ConversationKey(saver.tenant, "old")
        tail: str | None = None
        parent: str | None = None
        locs: dict[str, list[Any]] = {}
        heads: dict[str, list[Any]] = {}
        old_ids: list[str] = []
        for i in range(3):  # the older layout, row by row: blobs, then the checkpoint
            cp = checkpoint({}, {"a": i + 1, "big": 1})
            del cp["channel_values"]
            values = {"a": f"a{i}", **({"big": "x" * 1000} if i == 0 else {})}
            start = await count(stores, key)
            rows: list[Message] = []
            for offset, (channel, value) in enumerate(values.items()):
                version = str(cp["channel_versions"][channel])
                packed = pack(saver.serde.dumps_typed(value))
                rows.append(blob_message("", cp["id"], channel, version, packed))
                locs[channel] = [version, start + offset]
            seq = start + len(rows)
            prev_max = max((h[0] for h in heads.values()), default=None)
            heads = {"": [cp["id"], seq]}
            row = checkpoint_message(
                "",
                cp["id"],
                parent,
                pack(saver.serde.dumps_typed(cp)),
                pack(saver.serde.dumps_typed({"step": i})),
                locs,
                prev_max,
                heads,
                seq + 1,
                {},
            )
            content = {k: v for k, v in row.content.items() if k != "values"}
            rows.append(Message(row.id, row.role, content, row.metadata))
            await stores.conversations.append_messages(
                key, "alice", rows, expected_tail=tail, metadata={OWN_ROWS: seq + 1}
            )
            tail, parent = row.id, cp["id"]
            old_ids.append(cp["id"])
        latest = await saver.aget_tuple(config("old"))
        assert latest is not None and latest.checkpoint["id"] == old_ids[-1]
        assert latest.checkpoint["channel_values"] == {"a": "a2", "big": "x" * 1000}
        listed = [t.checkpoint["id"] async for t in saver.alist(config("old"))]
        assert listed == old_ids[::-1]
        first = await saver.aget_tuple(config("old", old_ids[0]))
        assert first is not None and first.checkpoint["channel_values"]["a"] == "a0"
        new = checkpoint({"a": "a3", "big": "x" * 1000}, {"a": 4, "big": 1})
        await saver.aput(config("old", parent), new, {"step": 3}, {"a": 4})
        for fresh in (saver, AgentStoresSaver(stores, tenant=saver.tenant, principal="alice")):
            latest = await fresh.aget_tuple(config("old"))
            assert latest is not None and latest.checkpoint["id"] == new["id"]
            assert latest.checkpoint["channel_values"] == {"a": "a3", "big": "x" * 1000}
            assert latest.parent_config is not None
            assert latest.parent_config["configurable"]["checkpoint_id"] == old_ids[-1]
