"""Redis push: what publishing wake-ups costs the writes, on Valkey standalone and cluster.

The same write workload (supervision CAS taking the next epoch, a recording put, an
append of one message; each client on keys of its own) through two open bundles, one
with push off and one with push on, in short windows alternating between them (off, on,
on, off, ...: drift on a shared machine falls on both alike): first with nobody
following, then while another process follows 1,000 keys, the written keys among them
(so every write with push on is published to a subscriber). Reported per op: the
throughput ratio on / off, and the servers' own time per write call (``INFO
commandstats``: the script's run including its ``SPUBLISH``). A benchmark: it reports,
it asserts nothing::

    python -m tests.bench.redis_push --clients 1,8 --seconds 0.5 --rounds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores_redis.stores import RedisStores
from tests.servers.valkey import ValkeyCluster, ValkeyServer

TENANT = "bench-push"
OWNER = "owner"
FOLLOWED = 1000
PHASES = ("nobody", "followed")
OPS = ("cas", "put", "append")
SNAPSHOT = "lorem ipsum " * 80


def _key(op: str, client: int) -> ConversationKey:
    return ConversationKey(TENANT, f"{op}-{client}")


def followed_keys(clients: int) -> list[ConversationKey]:
    """The keys the follower watches: every written key, then others up to 1,000."""
    written = [_key(op, c) for op in OPS for c in range(clients)]
    rest = [ConversationKey(TENANT, f"idle-{n}") for n in range(FOLLOWED - len(written))]
    return written + rest


class Writer:
    """One client's state: its next epoch, index, message number."""

    def __init__(self, stores: RedisStores, index: int) -> None:
        self.stores, self.index = stores, index
        self.epoch, self.rec, self.appended = 1, 0, 0

    async def prepare(self) -> None:
        sup = self.stores.supervision
        row = SupervisionRow("running", "turn", self.epoch)
        await sup.compare_and_swap(_key("cas", self.index), OWNER, None, row)

    async def cas(self) -> None:
        row = SupervisionRow("running", "turn", self.epoch + 1)
        key = _key("cas", self.index)
        assert await self.stores.supervision.compare_and_swap(key, OWNER, self.epoch, row)
        self.epoch += 1

    async def put(self) -> None:
        self.rec += 1
        event = RecordedEvent(self.rec, {"text": SNAPSHOT}, "turn", 1)
        assert await self.stores.recording.put(_key("put", self.index), OWNER, event)

    async def append(self) -> None:
        self.appended += 1
        msg = Message(f"a{self.appended}", "assistant", {"text": "lorem ipsum " * 8})
        key = _key("append", self.index)
        assert await self.stores.conversations.append_messages(key, OWNER, [msg])


async def throughput(writers: list[Writer], op: str, seconds: float) -> float:
    """Operations per second of every writer running ``op`` back to back."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def work(w: Writer) -> None:
        nonlocal done
        call: Callable[[], Awaitable[None]] = getattr(w, op)
        while time.perf_counter() < deadline:
            await call()
            done += 1

    began = time.perf_counter()
    await asyncio.gather(*(work(w) for w in writers))
    return done / (time.perf_counter() - began)


class Follower:
    """Another process watching :data:`FOLLOWED` keys (``--follow``)."""

    def __init__(self, url: str, clients: int) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.bench.redis_push",
                "--follow",
                url,
                "--clients",
                f"{clients}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.proc.kill()
            raise RuntimeError(f"the follower did not start: {line!r}")

    def stop(self) -> int:
        """Stop it; how many wake-ups it heard."""
        out, _ = self.proc.communicate("stop\n", timeout=30)
        return int(out.strip() or 0)


async def follow(url: str, clients: int) -> None:
    """The follower process: watch the keys until every one is pushed, say ``ready``,
    count wake-ups until stdin closes, print the count."""
    heard = 0
    async with RedisStores(url) as stores:
        hub = stores.wakeups
        deliver = hub.notify

        def counting(key: ConversationKey) -> None:
            nonlocal heard
            heard += 1
            deliver(key)

        hub.notify = counting  # type: ignore[method-assign]
        watches = [hub.watch(key) for key in followed_keys(clients)]
        deadline = time.monotonic() + 60
        while not all(w.pushed for w in watches):
            if time.monotonic() > deadline:
                raise RuntimeError("the followed keys were not all subscribed within a minute")
            await asyncio.sleep(0.05)
        heard = 0
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for w in watches:
            w.close()
    print(heard, flush=True)


async def server_time(stores: RedisStores) -> tuple[int, int]:
    """``(calls, µs)`` of ``EVALSHA`` so far, summed over the primaries."""
    calls = usec = 0
    for info in await stores.client.on_primaries("INFO", "commandstats"):
        text = info.decode() if isinstance(info, bytes) else str(info)
        found = re.search(r"cmdstat_evalsha:calls=(\d+),usec=(\d+)", text)
        if found:
            calls, usec = calls + int(found[1]), usec + int(found[2])
    return calls, usec


async def measure(base: str, clients: int, seconds: float, rounds: int) -> dict[str, Any]:
    """Per phase and op: ops/s with push off and on (each summed over the rounds), their
    ratio, the servers' µs per write call either way; and the follower's wake-ups."""
    out: dict[str, Any] = {"clients": clients}
    off_url, on_url = f"{base}&push=false", f"{base}&push=true"
    for phase in PHASES:
        follower = Follower(on_url, clients) if phase == "followed" else None
        cells: dict[str, Any] = {}
        try:
            async with RedisStores(off_url) as off, RedisStores(on_url) as on:
                bundles = {"off": off, "on": on}
                writers = [Writer(off, i) for i in range(clients)]
                for w in writers:
                    await w.prepare()
                for op in OPS:
                    rates: dict[str, list[float]] = {"off": [], "on": []}
                    spent = {"off": [0, 0], "on": [0, 0]}
                    for n in range(rounds):
                        order = ("off", "on") if n % 2 == 0 else ("on", "off")
                        for mode in order:
                            for w in writers:
                                w.stores = bundles[mode]
                            await throughput(writers, op, seconds / 5)  # warm-up
                            calls0, usec0 = await server_time(off)
                            rates[mode].append(await throughput(writers, op, seconds))
                            calls1, usec1 = await server_time(off)
                            spent[mode][0] += calls1 - calls0
                            spent[mode][1] += usec1 - usec0
                    cell = {m: sum(r) / len(r) for m, r in rates.items()}
                    cell["on/off"] = cell["on"] / cell["off"]
                    for m in ("off", "on"):
                        cell[f"server_us_{m}"] = spent[m][1] / max(1, spent[m][0])
                    cell["rounds"] = rates
                    cells[op] = cell
                await off.purge()
        finally:
            if follower is not None:
                cells["follower_wakeups"] = follower.stop()
        out[phase] = cells
    return out


def _summary(found: dict[str, Any], phase: str) -> str:
    """One line: each op's throughput ratio on / off, and the servers' µs per call."""
    return "  ".join(
        f"{op} {c['on/off']:.2f}x ({c['off']:,.0f}/s off; server {c['server_us_off']:.1f}"
        f" -> {c['server_us_on']:.1f} µs)"
        for op, c in ((op, found[phase][op]) for op in OPS)
    )


async def main(args: argparse.Namespace) -> None:
    results = []
    with ValkeyServer() as server, ValkeyCluster() as cluster:
        for name, url in (("valkey", server.url), ("valkey-cluster", cluster.url)):
            for clients in (int(c) for c in args.clients.split(",")):
                base = f"{url}?key_prefix=benchpush"
                found = await measure(base, clients, args.seconds, args.rounds)
                found["server"] = name
                results.append(found)
                for phase in PHASES:
                    print(
                        f"{name:15} clients={clients:<2} {phase:9} {_summary(found, phase)}",
                        flush=True,
                    )
    if args.json:
        print(json.dumps(results, indent=1))


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,8", help="client counts (default 1,8)")
    parser.add_argument("--seconds", type=float, default=0.5, help="seconds per window")
    parser.add_argument("--rounds", type=int, default=10, help="windows per mode, op, phase")
    parser.add_argument("--json", action="store_true", help="also print every figure as JSON")
    parser.add_argument("--follow", metavar="URL", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = _parse()
    if arguments.follow:
        asyncio.run(follow(arguments.follow, int(arguments.clients)))
    else:
        asyncio.run(main(arguments))
