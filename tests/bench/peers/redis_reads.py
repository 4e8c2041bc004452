"""``python -m tests.bench.peers.redis_reads``: agentstores-redis's hot calls beside a bare
``LRANGE`` (the OpenAI Agents SDK ``RedisSession``'s read), on a private Valkey 9, in
alternating rounds, at each transcript length.

- ``recent``: ``recent(key, principal, 20)`` through the store (the whole call);
- ``recent-raw``: its ``MULTI``/``EXEC`` through the adapter's own client, the replies
  left undecoded (``recent`` minus this is the check and the decoding);
- ``lrange``: a bare ``LRANGE -20 -1`` of a list through redis-py, each item parsed by
  ``json.loads`` as that session does (no check at all);
- ``first-user``: ``get_transcript(index=0, speaker="user")`` through the store;
- ``append`` and ``append-previous``: one message appended by this version's script and
  by the previous layout's (``tests/redis/previous_layout_append.lua``, through the same
  call), each on its own conversation of the same length;
- last, once: the first read of a conversation of that length written by the previous
  layout, which converts it (the conversion script's server time beside the call's).

Each line gives the p50 per round, the median of those, the client process's CPU per
call and the server's own time per call (``INFO commandstats`` over each round's timed
calls, every command of the call summed; medians over rounds); then ``recent`` /
``lrange`` and ``append`` / ``append-previous`` per round, in wall time and server time.
Runs in the ``bench-peers`` (or ``bench``) environment: ``.nox/bench-peers/bin/python -m
tests.bench.peers.redis_reads`` from the repository root; ``--lengths 10,1000,10000
--rounds 8 --calls 300``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.plugins import create_stores
from agentstores_redis import conversations
from agentstores_redis.client import Script

from .systems import role_of, text_of

PREVIOUS_APPEND = Script(
    "conv_append_previous",
    (Path(__file__).parents[2] / "redis" / "previous_layout_append.lua").read_text("utf-8"),
    write=True,
)
"""The previous layout's append script, which the tests write that layout with."""

Case = Callable[[], Awaitable[object]]


async def _median_ms(fn: Case, calls: int) -> tuple[float, float]:
    """p50 wall ms of ``calls`` calls, and the client process's CPU µs per call (less
    sensitive to a loaded machine than wall time, and blind to the server's share)."""
    lat = []
    cpu0 = time.process_time_ns()
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        await fn()
        lat.append(time.perf_counter_ns() - t0)
    cpu = (time.process_time_ns() - cpu0) / calls / 1e3
    return statistics.median(lat) / 1e6, cpu


def _message(n: int) -> Message:
    return Message(id=f"m{n}", role=role_of(n), content={"text": text_of(n)})  # type: ignore[arg-type]


async def _server_us(raw: Any) -> tuple[float, float]:
    """The server's time since the last ``CONFIG RESETSTAT``: every command's ``usec``
    summed (the bench's own ``CONFIG`` and ``INFO`` left out), and the scripts' alone."""
    stats = await raw.info("commandstats")
    total = sum(
        float(v["usec"]) for k, v in stats.items() if k not in ("cmdstat_config", "cmdstat_info")
    )
    return total, float(stats.get("cmdstat_evalsha", {}).get("usec", 0))


async def _at_length(url: str, length: int, rounds: int, calls: int) -> None:
    import redis.asyncio as aioredis

    previous = PREVIOUS_APPEND
    stores = create_stores(url)
    await stores.open()
    raw = aioredis.from_url(url)
    await raw.flushdb()
    who = "user-1"
    keys = {name: ConversationKey("reads", name) for name in ("c", "new", "old")}
    current = conversations.CONV_APPEND
    for name, key in keys.items():
        conversations.CONV_APPEND = previous if name == "old" else current
        for start in range(0, length, 1000):
            batch = [_message(n) for n in range(start, min(length, start + 1000))]
            await stores.conversations.append_messages(key, who, batch)
    conversations.CONV_APPEND = current
    items = [json.dumps({"role": role_of(n), "content": text_of(n)}) for n in range(length)]
    for start in range(0, length, 1000):
        await raw.rpush("list", *items[start : start + 1000])
    conv = stores.conversations
    names = conv._key_names(keys["c"])  # type: ignore[attr-defined]
    client = conv.ctx.client  # type: ignore[attr-defined]
    transaction = [
        ("HMGET", names.header, "owner", "erased_at", "drop_at", f"shared:{who}"),
        ("TIME",),
        ("ZRANGE", names.user_records, -20, -1, "WITHSCORES"),
        ("ZRANGE", names.assistant_records, -20, -1, "WITHSCORES"),
    ]
    counter = [10_000_000]

    def appender(key: ConversationKey, script: Any) -> Case:
        async def append() -> object:
            counter[0] += 1
            conversations.CONV_APPEND = script  # the script the adapter's call runs
            try:
                return await conv.append_messages(key, who, [_message(counter[0])])
            finally:
                conversations.CONV_APPEND = current

        return append

    async def lrange() -> object:
        return [json.loads(x) for x in await raw.lrange("list", -20, -1)]

    cases: dict[str, Case] = {
        "recent": lambda: conv.recent(keys["c"], who, 20),
        "recent-raw": lambda: client.transaction(names.header, transaction),
        "lrange": lrange,
        "first-user": lambda: conv.get_transcript(keys["c"], who, index=0, speaker="user"),
        "append": appender(keys["new"], current),
        "append-previous": appender(keys["old"], previous),
    }
    assert len(await conv.recent(keys["c"], who, 20)) == min(20, length)
    medians: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    servers: dict[str, list[float]] = {name: [] for name in cases}
    scripts: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(rounds):
        order = list(cases.items())
        if r % 2:
            order.reverse()
        for name, fn in order:
            for _ in range(min(50, calls)):
                await fn()
            await raw.config_resetstat()
            p50, cpu = await _median_ms(fn, calls)
            total, script = await _server_us(raw)
            servers[name].append(total / calls)
            scripts[name].append(script / calls)
            medians[name].append(p50)
            cpus[name].append(cpu)
    server = {name: statistics.median(values) for name, values in servers.items()}
    # one conversation of the previous layout, converted by its first read
    unconverted = ConversationKey("reads", "unconverted")
    conversations.CONV_APPEND = previous
    for start in range(0, length, 1000):
        batch = [_message(n) for n in range(start, min(length, start + 1000))]
        await conv.append_messages(unconverted, who, batch)
    conversations.CONV_APPEND = current
    await raw.config_resetstat()
    began = time.perf_counter()
    await conv.recent(unconverted, who, 20)
    converted_ms = (time.perf_counter() - began) * 1e3
    _total, upgrade_us = await _server_us(raw)
    await raw.aclose()
    await stores.close()
    print(f"at {length:,} messages, p50 ms per round ({rounds} rounds of {calls} calls):")
    for name, values in medians.items():
        rounds_text = " ".join(f"{v:.3f}" for v in values)
        print(
            f"  {name:16s} median {statistics.median(values):.3f}   client CPU"
            f" {statistics.median(cpus[name]):5.1f} µs   server {server[name]:5.1f} µs"
            f"   rounds {rounds_text}"
        )
    print(
        f"  converting the previous layout (first read): {converted_ms:.1f} ms,"
        f" {upgrade_us / 1e3:.1f} ms of it the conversion script on the server"
    )
    for a, b, extra in (("recent", "lrange", ()), ("append", "append-previous", ("script",))):
        shown = {"p50": medians, "server time": servers, "script": scripts}
        for what in ("p50", "server time", *extra):
            values = shown[what]
            ratios = [x / y for x, y in zip(values[a], values[b], strict=True)]
            print(
                f"  {a} / {b} {what} per round: {' '.join(f'{x:.2f}' for x in ratios)}"
                f"  (median {statistics.median(ratios):.2f})"
            )


async def main(argv: list[str] | None = None) -> None:
    from tests.servers.valkey import ValkeyServer

    parser = argparse.ArgumentParser(prog="python -m tests.bench.peers.redis_reads")
    parser.add_argument("--lengths", default="10,1000,10000")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300, help="calls per case per round")
    args = parser.parse_args(argv)
    with ValkeyServer(appendonly=True, appendfsync="everysec") as server:
        for length in (int(v) for v in args.lengths.split(",")):
            await _at_length(server.url, length, args.rounds, args.calls)


if __name__ == "__main__":
    asyncio.run(main())
