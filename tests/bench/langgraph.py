"""AgentStoresSaver beside langgraph-checkpoint-postgres's saver, on the same servers, in
one run; and "the first thing the user said" read from checkpoints and from the
conversation store.

Servers: ``$AGENTSTORES_TEST_POSTGRES_URL`` (a superuser URL: a fresh agentstores schema
and a private schema for LangGraph's saver, both dropped at the end) and
``$AGENTSTORES_TEST_REDIS_URL`` (a fresh key prefix, purged at the end).

Measured, in alternating rounds (each round times every contender once, the order
rotating), median per operation:

- ``put`` (a checkpoint whose ``messages`` channel changed) and ``get_tuple`` (latest)
  on threads of 10 and 1,000 checkpoints, for AgentStoresSaver on PostgreSQL and on
  Redis and AsyncPostgresSaver on the same PostgreSQL; next to each server's raw floor
  (one primary-key INSERT / SELECT with asyncpg, one SET / GET with redis-py, payloads of
  the same size), ``get_tuple`` also by a saver that never saw the thread (``cold``: a
  worker's first read of it), and the conversation store's own floor on each (``append_messages`` of
  two rows of a put's sizes, conditioned on the tail; ``read_messages`` of the last row):
  a put is one such append, a get_tuple one such read. Ratios are what to read: the
  machine may be loaded.
- first user message at 10 and 10,000 messages: ``CheckpointTranscript.get_transcript(
  index=0, speaker="user")`` over AgentStoresSaver and over AsyncPostgresSaver (it walks
  every checkpoint, as symfonic-core does, for the checkpoint-granular timestamps), and
  ``conv.message(0, speaker="user")`` on the conversation the turns were published to.

- with ``--cpu`` (servers on this machine): the CPU time of a put, this process's and
  the PostgreSQL server processes' serving it (``/proc/PID/schedstat``), for
  AgentStoresSaver on PostgreSQL and AsyncPostgresSaver, in alternating blocks with
  ``synchronous_commit`` on. Wall times on a shared machine move with its load and the
  disk's flushes; CPU time per call is what the work costs.

    python -m tests.bench.langgraph [--rounds 15] [--json] [--only checkpoints] [--cpu]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6

from agentstores import ConversationKey, open_stores
from agentstores_langgraph import AgentStoresSaver, CheckpointTranscript, TurnPublisher

PAYLOAD = 2000
"""Bytes of the channel value each put changes (a turn's messages, roughly)."""


def _checkpoint(step: int, versions: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
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


class Thread:
    """One thread being extended by puts; ``put`` adds one checkpoint after the last."""

    def __init__(self, saver: BaseCheckpointSaver, thread_id: str) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.parent: str | None = None
        self.step = 0

    async def put(self) -> None:
        self.step += 1
        versions = {"messages": self.step, "constant": 1}
        new = {"messages": self.step, **({"constant": 1} if self.step == 1 else {})}
        values = {"messages": "m" * PAYLOAD, "constant": "c" * PAYLOAD}
        configurable: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": ""}
        if self.parent:
            configurable["checkpoint_id"] = self.parent
        stored = await self.saver.aput(
            {"configurable": configurable}, _checkpoint(self.step, versions, values), {}, new
        )
        self.parent = stored["configurable"]["checkpoint_id"]

    async def get(self) -> None:
        found = await self.saver.aget_tuple({"configurable": {"thread_id": self.thread_id}})
        assert found is not None and found.checkpoint["id"] == self.parent

    def cold_get(self) -> Callable[[], Awaitable[None]]:
        """``get`` by a saver that has never seen the thread (another worker's first read)."""
        saver = self.saver
        assert isinstance(saver, AgentStoresSaver)

        async def get() -> None:
            fresh = AgentStoresSaver(saver.stores, tenant=saver.tenant, principal=saver.principal)
            found = await fresh.aget_tuple({"configurable": {"thread_id": self.thread_id}})
            assert found is not None and found.checkpoint["id"] == self.parent

        return get


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return (time.perf_counter() - start) * 1000


async def alternate(
    contenders: dict[str, Callable[[], Awaitable[Any]]], rounds: int
) -> dict[str, float]:
    """Median ms per contender over ``rounds`` rounds, each round all of them once, the
    starting contender rotating."""
    names = list(contenders)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(await timed(contenders[name]))
    return {n: statistics.median(s) for n, s in samples.items()}


def _on_cpu(pids: list[int]) -> float:
    """Seconds the processes ``pids`` have run on a CPU."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


async def cpu_costs(env: dict[str, Any], size: int, blocks: int, per_block: int = 25) -> Any:
    """Client and server CPU per put at ``size`` checkpoints, PostgreSQL savers only."""
    import asyncpg

    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    ours = AgentStoresSaver(env["pg_stores"], tenant=tenant)
    lg = env["lg_pg"]
    threads = {
        "agentstores[postgres]": Thread(ours, f"cpu-{uuid.uuid4().hex[:6]}"),
        "langgraph PostgresSaver": Thread(lg, f"cpu-{uuid.uuid4().hex[:6]}"),
    }
    for thread in threads.values():
        for _ in range(size):
            await thread.put()
    admin = await asyncpg.connect(env["admin"])
    try:
        role = env["pg_role"]
        ours_pids = [
            r["pid"]
            for r in await admin.fetch("SELECT pid FROM pg_stat_activity WHERE usename = $1", role)
        ]
    finally:
        await admin.close()
    pids = {
        "agentstores[postgres]": ours_pids,
        "langgraph PostgresSaver": [lg.conn.info.backend_pid],
    }
    spent = {name: [0.0, 0.0, 0] for name in threads}
    names = list(threads)
    for b in range(blocks):
        for name in names[b % 2 :] + names[: b % 2]:
            server = _on_cpu(pids[name])
            client = time.process_time()
            for _ in range(per_block):
                await threads[name].put()
            spent[name][0] += time.process_time() - client
            spent[name][1] += _on_cpu(pids[name]) - server
            spent[name][2] += per_block
    return {
        name: {"client_us": c / n * 1e6, "server_us": sv / n * 1e6, "total_us": (c + sv) / n * 1e6}
        for name, (c, sv, n) in spent.items()
    }


@contextlib.asynccontextmanager
async def servers() -> AsyncIterator[dict[str, Any]]:
    from tests.langgraph.pgsaver import postgres_saver
    from tests.servers.postgres import Installation

    admin = os.environ.get("AGENTSTORES_TEST_POSTGRES_URL")
    redis_base = os.environ.get("AGENTSTORES_TEST_REDIS_URL")
    if not admin or not redis_base:
        raise SystemExit("set AGENTSTORES_TEST_POSTGRES_URL and AGENTSTORES_TEST_REDIS_URL")
    prefix = f"aslg-bench-{uuid.uuid4().hex[:8]}"
    redis_url = f"{redis_base}{'&' if '?' in redis_base else '?'}key_prefix={prefix}"
    async with (
        Installation(admin, prefix="aslgb") as inst,
        open_stores(inst.url) as pg_stores,
        open_stores(redis_url) as redis_stores,
        postgres_saver(admin) as lg_pg,
    ):
        try:
            yield {
                "admin": admin,
                "redis": redis_base,
                "pg_stores": pg_stores,
                "redis_stores": redis_stores,
                "lg_pg": lg_pg,
                "pg_role": inst.role,
            }
        finally:
            await redis_stores.purge()  # type: ignore[attr-defined]


def store_floor(stores: Any, name: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """One conditional append of a put's two rows, and one read of the last row."""
    from agentstores import Message

    key = ConversationKey(f"floor-{uuid.uuid4().hex[:8]}", "floor")
    state: dict[str, Any] = {"tail": None, "n": 0}

    async def append() -> None:
        state["n"] += 1
        n = state["n"]
        rows = [
            Message(f"b{n}", "other", {"value": "m" * (PAYLOAD * 4 // 3)}, {"kind": "blob"}),
            Message(f"c{n}", "other", {"checkpoint": "c" * 600}, {"kind": "checkpoint"}),
        ]
        await stores.conversations.append_messages(key, "", rows, expected_tail=state["tail"])
        state["tail"] = f"c{n}"

    async def read() -> None:
        await stores.conversations.read_messages(key, "", start=2 * state["n"] - 1, limit=64)

    return {f"floor {name} append": append, f"floor {name} read": read}


@contextlib.asynccontextmanager
async def floors(
    admin: str, redis_base: str
) -> AsyncIterator[dict[str, Callable[[], Awaitable[Any]]]]:
    import asyncpg  # type: ignore[import-untyped]
    import redis.asyncio as aioredis

    conn = await asyncpg.connect(admin)
    await conn.execute("CREATE TEMP TABLE floor (k bigint PRIMARY KEY, v bytea)")
    client = aioredis.from_url(redis_base)
    key = f"aslg-bench-floor-{uuid.uuid4().hex[:8]}"
    payload = b"m" * PAYLOAD
    counter = iter(range(1, 10**9))
    last = {"k": 0}

    async def pg_put() -> None:
        last["k"] = next(counter)
        await conn.execute("INSERT INTO floor VALUES ($1, $2)", last["k"], payload)

    async def pg_get() -> None:
        await conn.fetchval("SELECT v FROM floor WHERE k = $1", last["k"])

    async def redis_put() -> None:
        await client.set(key, payload)

    async def redis_get() -> None:
        await client.get(key)

    try:
        yield {"pg_put": pg_put, "pg_get": pg_get, "redis_put": redis_put, "redis_get": redis_get}
    finally:
        await client.delete(key)
        await client.aclose()
        await conn.close()


async def checkpoint_costs(env: dict[str, Any], rounds: int) -> dict[str, Any]:
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    savers: dict[str, BaseCheckpointSaver] = {
        "agentstores[postgres]": AgentStoresSaver(env["pg_stores"], tenant=tenant),
        "agentstores[redis]": AgentStoresSaver(env["redis_stores"], tenant=tenant),
        "langgraph PostgresSaver": env["lg_pg"],
    }
    out: dict[str, Any] = {}
    stores_floor = {
        **store_floor(env["pg_stores"], "agentstores[postgres]"),
        **store_floor(env["redis_stores"], "agentstores[redis]"),
    }
    await stores_floor["floor agentstores[postgres] append"]()
    await stores_floor["floor agentstores[redis] append"]()
    async with floors(env["admin"], env["redis"]) as floor:
        for size in (10, 1000):
            threads = {
                name: Thread(s, f"th-{size}-{uuid.uuid4().hex[:6]}") for name, s in savers.items()
            }
            for thread in threads.values():
                for _ in range(size):
                    await thread.put()
            puts = await alternate(
                {
                    **{n: t.put for n, t in threads.items()},
                    "floor pg INSERT": floor["pg_put"],
                    "floor redis SET": floor["redis_put"],
                    **{n: f for n, f in stores_floor.items() if n.endswith("append")},
                },
                rounds,
            )
            gets = await alternate(
                {
                    **{n: t.get for n, t in threads.items()},
                    **{
                        f"{n} cold": t.cold_get()
                        for n, t in threads.items()
                        if isinstance(t.saver, AgentStoresSaver)
                    },
                    "floor pg SELECT": floor["pg_get"],
                    "floor redis GET": floor["redis_get"],
                    **{n: f for n, f in stores_floor.items() if n.endswith("read")},
                },
                rounds,
            )
            out[f"{size} checkpoints"] = {"put_ms": puts, "get_tuple_ms": gets}
    return out


def _turns(count: int, per_checkpoint: int) -> list[list[Any]]:
    """``count`` messages as batches of ``per_checkpoint`` (user, assistant alternating)."""
    batches: list[list[Any]] = []
    for start in range(0, count, per_checkpoint):
        batch = []
        for i in range(start, min(count, start + per_checkpoint)):
            cls = HumanMessage if i % 2 == 0 else AIMessage
            batch.append(cls(f"message {i} " + "w" * 80, id=f"m{i}"))
        batches.append(batch)
    return batches


async def first_message_costs(env: dict[str, Any], rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    ours = AgentStoresSaver(env["pg_stores"], tenant=tenant)
    publisher = TurnPublisher(env["pg_stores"], tenant=tenant)
    for count, per in ((10, 2), (10_000, 500)):
        thread = f"fm-{count}-{uuid.uuid4().hex[:6]}"
        history: list[Any] = []
        for saver in (ours, env["lg_pg"]):
            t = Thread(saver, thread)
            history = []
            for batch in _turns(count, per):
                history += batch
                t.step += 1
                configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
                if t.parent:
                    configurable["checkpoint_id"] = t.parent
                stored = await saver.aput(
                    {"configurable": configurable},
                    _checkpoint(t.step, {"messages": t.step}, {"messages": list(history)}),
                    {},
                    {"messages": t.step},
                )
                t.parent = stored["configurable"]["checkpoint_id"]
                if saver is ours:
                    await publisher.publish(thread, history)
        conv = env["pg_stores"].conversation(ConversationKey(tenant, thread), "")
        out[f"{count} messages"] = await alternate(
            {
                "checkpoints, agentstores[postgres]": _via_checkpoints(ours, thread),
                "checkpoints, langgraph PostgresSaver": _via_checkpoints(env["lg_pg"], thread),
                "conversation store, postgres": _via_store(conv),
            },
            max(3, rounds // 3) if count > 10 else rounds,
        )
    return out


def _via_store(conv: Any) -> Callable[[], Awaitable[None]]:
    async def read() -> None:
        found = await conv.message(0, speaker="user")
        assert found is not None and found.id == "m0"

    return read


def _via_checkpoints(saver: BaseCheckpointSaver, thread: str) -> Callable[[], Awaitable[None]]:
    transcript = CheckpointTranscript(saver)

    async def read() -> None:
        rows = await transcript.get_transcript(thread, index=0, speaker="user")
        assert rows[0].message_id == "m0"

    return read


def _ratios(table: dict[str, float], base: str) -> dict[str, float]:
    return {n: round(v / table[base], 2) for n, v in table.items()}


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.langgraph")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--only", choices=("checkpoints", "first_user_message"), help="measure one part"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="also CPU per put (PostgreSQL on this machine)"
    )
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"checkpoints": {}, "first_user_message": {}, "cpu_per_put": {}}
    async with servers() as env:
        if args.only in (None, "checkpoints"):
            report["checkpoints"] = await checkpoint_costs(env, args.rounds)
        if args.cpu:
            for size in (10, 1000):
                report["cpu_per_put"][f"{size} checkpoints"] = await cpu_costs(
                    env, size, blocks=2 * args.rounds
                )
        if args.only in (None, "first_user_message"):
            report["first_user_message"] = await first_message_costs(env, args.rounds)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"median ms over {args.rounds} alternating rounds (machine possibly loaded: read ratios)")
    for size, ops in report["checkpoints"].items():
        for op, table in ops.items():
            base = "floor pg INSERT" if op == "put_ms" else "floor pg SELECT"
            print(f"\n{op.removesuffix('_ms')} at {size}")
            ratio_lg = _ratios(table, "langgraph PostgresSaver")
            ratio_floor = _ratios(table, base)
            for name, ms in table.items():
                print(
                    f"  {name:36s} {ms:9.2f} ms  x{ratio_floor[name]:6.2f} pg floor"
                    f"  x{ratio_lg[name]:6.2f} PostgresSaver"
                )
    for size, table in report["cpu_per_put"].items():
        print(f"\nCPU per put at {size} (client + PostgreSQL server processes)")
        base = table["langgraph PostgresSaver"]["total_us"]
        for name, cost in table.items():
            print(
                f"  {name:36s} client {cost['client_us']:6.0f} us  server "
                f"{cost['server_us']:6.0f} us  total {cost['total_us']:6.0f} us"
                f"  x{cost['total_us'] / base:5.2f} PostgresSaver"
            )
    for size, table in report["first_user_message"].items():
        print(f"\nfirst user message at {size}")
        ratio = _ratios(table, "conversation store, postgres")
        for name, ms in table.items():
            print(f"  {name:38s} {ms:10.2f} ms  x{ratio[name]:8.1f} conversation store")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
