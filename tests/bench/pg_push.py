"""``python -m tests.bench.pg_push``: what PostgreSQL push costs a write, in one run.

The same write workload (``clients`` concurrent clients, each its own opened bundle and its
own key, one operation flat out for ``seconds``) under four settings, in rounds that
alternate their order on one embedded PostgreSQL 18:

- ``off``: ``push=false`` (no listener, the functions never notify);
- ``on``: push on, nobody following: every bundle listens, no key is followed;
- ``on+1000``: push on and another bundle following 1,000 keys, none of them written;
- ``on+written``: push on and that bundle following the written keys too, so every
  write notifies (what a followed write costs; each of the ``clients + 1`` listening
  connections reads every notification).

Operations: ``cas`` (supervision CAS taking the next epoch), ``put`` (recording put of a
~1 KiB snapshot), ``append`` (one message). It reports throughput, p50 latency and each
setting's ratio to ``off``; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores_postgres.stores import PostgresStores

SETTINGS = ("off", "on", "on+1000", "on+written")
OPS = ("cas", "put", "append")
FOLLOWED = 1000
SETTLE = 2.0
"""Seconds of rest after an ``on+written`` window, whose notifications every listening
connection still reads for a while afterwards."""
SNAPSHOT = "x" * 1000
P = "bench"


@dataclass
class Client:
    """One client: its bundle, its key and the state its operation needs."""

    stores: PostgresStores
    key: ConversationKey
    epoch: int = 1
    index: int = 0
    latencies: list[float] = field(default_factory=list)


async def _cas(c: Client) -> None:
    row = SupervisionRow("running", "turn", c.epoch + 1)
    assert await c.stores.supervision.compare_and_swap(c.key, P, c.epoch, row)
    c.epoch += 1


async def _put(c: Client) -> None:
    c.index += 1
    assert await c.stores.recording.put(
        c.key, P, RecordedEvent(c.index, {"text": SNAPSHOT}, "turn", 1)
    )


async def _append(c: Client) -> None:
    c.index += 1
    msg = Message(f"a{c.index}", "assistant", {"text": "lorem ipsum " * 8})
    assert len(await c.stores.conversations.append_messages(c.key, P, [msg])) == 1


RUN: dict[str, Callable[[Client], Awaitable[None]]] = {"cas": _cas, "put": _put, "append": _append}


class Follower:
    """A bundle that follows a chosen set of keys (each setting's)."""

    def __init__(self, stores: PostgresStores) -> None:
        self.stores = stores
        self.watches: dict[ConversationKey, Any] = {}

    async def follow(self, keys: list[ConversationKey]) -> None:
        """Watch exactly ``keys``; return once each is subscribed and the others' rows are
        gone."""
        hub, wanted = self.stores.wakeups, set(keys)
        for key in [k for k in self.watches if k not in wanted]:
            self.watches.pop(key).close()
        for key in wanted - self.watches.keys():
            self.watches[key] = hub.watch(key)
        async with asyncio.timeout(60):
            while not all(hub.pushing(k) for k in keys) or await self._rows() != len(keys):  # noqa: ASYNC110
                await asyncio.sleep(0.02)

    async def _rows(self) -> int:
        schema = self.stores.schema

        async def run(conn: Any) -> int:
            return int(await conn.fetchval(f'SELECT count(*) FROM "{schema}".watches'))

        return await self.stores.db.read(run)


async def _open(url: str, clients: int, stack: contextlib.AsyncExitStack) -> list[PostgresStores]:
    return [
        await stack.enter_async_context(PostgresStores(url, pool_min_size=1, pool_max_size=2))
        for _ in range(clients)
    ]


def server_cpu(postmaster: int | None) -> float:
    """CPU seconds the server's processes (the postmaster's children) have used so far;
    0 when the server is not ours to inspect."""
    if postmaster is None:
        return 0.0
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:  # ppid; utime and stime follow at 11 and 12
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def _window(
    group: list[Client], op: str, seconds: float, warmup: float, postmaster: int | None
) -> dict[str, float]:
    """Every client runs ``op`` flat out: ops/s, p50 ms, and CPU microseconds per op on
    the server and in this process (less sensitive than throughput to a busy machine)."""
    run = RUN[op]
    for c in group:
        c.latencies = []

    async def worker(c: Client, until: float, timed: bool) -> None:
        while (start := time.perf_counter()) < until:
            await run(c)
            if timed:
                c.latencies.append(time.perf_counter() - start)

    now = time.perf_counter()
    await asyncio.gather(*(worker(c, now + warmup, False) for c in group))
    server, client = server_cpu(postmaster), time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(worker(c, start + seconds, True) for c in group))
    elapsed = time.perf_counter() - start
    server, client = server_cpu(postmaster) - server, time.process_time() - client
    latencies = [x for c in group for x in c.latencies]
    return {
        "ops": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "server_us": server / len(latencies) * 1e6,
        "client_us": client / len(latencies) * 1e6,
    }


Results = dict[tuple[int, str, str], list[dict[str, float]]]


async def measure(
    url: str,
    clients: list[int],
    ops: list[str],
    seconds: float,
    warmup: float,
    rounds: int,
    postmaster: int | None = None,
) -> Results:
    """Every (clients, op, setting) window, ``rounds`` times, settings in alternating order
    (the bundles of both push settings and the follower stay open throughout)."""
    results: Results = {}
    others = [ConversationKey(f"f{n}", "followed") for n in range(FOLLOWED)]
    for n in clients:
        for op in ops:
            tenant = f"b{uuid.uuid4().hex[:8]}"
            async with contextlib.AsyncExitStack() as stack:
                groups = {
                    push: [
                        Client(b, ConversationKey(tenant, f"{op}-{push}-{i}"))
                        for i, b in enumerate(await _open(f"{url}&push={push}", n, stack))
                    ]
                    for push in ("false", "true")
                }
                follower = Follower(await stack.enter_async_context(PostgresStores(url)))
                if op == "cas":
                    for c in groups["false"] + groups["true"]:
                        row = SupervisionRow("running", "turn", 1)
                        assert await c.stores.supervision.compare_and_swap(c.key, P, None, row)
                for r in range(rounds):
                    for setting in SETTINGS if r % 2 == 0 else tuple(reversed(SETTINGS)):
                        group = groups["false" if setting == "off" else "true"]
                        followed = {
                            "on+1000": others,
                            "on+written": others + [c.key for c in group],
                        }.get(setting, [])
                        await follower.follow(followed)
                        got = await _window(group, op, seconds, warmup, postmaster)
                        if setting == "on+written":
                            # every listener reads every notification: let the backlog
                            # drain before the next window
                            await asyncio.sleep(SETTLE)
                        results.setdefault((n, op, setting), []).append(got)
                        print(
                            f"{n:>3} clients {op:<6} {setting:<10} {got['ops']:>8.0f} ops/s "
                            f"p50 {got['p50_ms']:.2f} ms, CPU/op server "
                            f"{got['server_us']:.0f} us client {got['client_us']:.0f} us",
                            flush=True,
                        )
                await follower.follow([])
    return results


def _median(values: list[float]) -> float:
    return statistics.median(values)


def table(results: Results, clients: list[int], ops: list[str]) -> str:
    """Markdown: per clients and op, ``off``'s throughput, then each other setting's
    throughput as a ratio to ``off`` (median over rounds, each round against its own
    ``off``, and the range); server CPU microseconds per op in brackets."""
    lines = [
        "| clients | op | off: ops/s, server CPU/op | " + " | ".join(SETTINGS[1:]) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in SETTINGS[1:]) + " |",
    ]
    for n in clients:
        for op in ops:
            off = results[(n, op, "off")]
            cells = [
                f"{_median([x['ops'] for x in off]):,.0f} "
                f"({_median([x['server_us'] for x in off]):.0f} us)"
            ]
            for setting in SETTINGS[1:]:
                got = results[(n, op, setting)]
                ratios = [a["ops"] / b["ops"] for a, b in zip(got, off, strict=True)]
                cpu = _median([x["server_us"] for x in got])
                cells.append(
                    f"{_median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}; {cpu:.0f} us)"
                )
            lines.append(f"| {n} | {op} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a runtime role's URL (default: start a server)")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    clients = [int(x) for x in args.clients.split(",")]
    ops = args.ops.split(",")

    def run(url: str, postmaster: int | None) -> Results:
        return asyncio.run(
            measure(url, clients, ops, args.seconds, args.warmup, args.rounds, postmaster)
        )

    if args.url:
        results = run(args.url, None)
    else:
        from tests.servers.postgres import EmbeddedPostgres, Installation

        with EmbeddedPostgres() as server, Installation(server.url) as inst:
            pid = int((server.pgdata / "postmaster.pid").read_text().split()[0])
            results = run(inst.url, pid)
    print(table(results, clients, ops))


if __name__ == "__main__":
    main()
