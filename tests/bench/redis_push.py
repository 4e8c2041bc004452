"""Redis push: what publishing wake-ups costs the writes, on Valkey standalone and cluster.

The same write workload (supervision CAS taking the next epoch, a recording put, an
append of one message; each client on keys of its own) with push off, with push on and
nobody following, and with push on while another process follows 1,000 keys (the
written keys among them: every write is published to a subscriber). The three modes
alternate within each round, so drift on a shared machine falls on all of them alike.
A benchmark: it reports, it asserts nothing::

    python -m tests.bench.redis_push --clients 1,8 --seconds 2 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
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
MODES = ("off", "on", "followed")
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


async def measure(base: str, clients: int, seconds: float, rounds: int) -> dict[str, Any]:
    """ops/s per op and mode (the median over the rounds), and the follower's wake-ups."""
    got: dict[str, dict[str, list[float]]] = {op: {m: [] for m in MODES} for op in OPS}
    wakes = 0
    url = {"off": f"{base}&push=false", "on": f"{base}&push=true"}
    for _ in range(rounds):
        for mode in MODES:
            follower = Follower(url["on"], clients) if mode == "followed" else None
            try:
                async with RedisStores(url["off" if mode == "off" else "on"]) as stores:
                    writers = [Writer(stores, i) for i in range(clients)]
                    for w in writers:
                        await w.prepare()
                    for op in OPS:
                        await throughput(writers, op, min(0.5, seconds))  # warm-up
                        got[op][mode].append(await throughput(writers, op, seconds))
                    await stores.purge()
            finally:
                if follower is not None:
                    wakes += follower.stop()
    medians = {op: {m: statistics.median(v) for m, v in by.items()} for op, by in got.items()}
    return {
        "clients": clients,
        "ops_per_s": medians,
        "on/off": {op: medians[op]["on"] / medians[op]["off"] for op in OPS},
        "followed/off": {op: medians[op]["followed"] / medians[op]["off"] for op in OPS},
        "all_rounds": got,
        "follower_wakeups": wakes,
    }


def _summary(found: dict[str, Any]) -> str:
    """One line: each op's ratios to push off, and its ops/s with push off."""
    return "  ".join(
        f"{op}: on {found['on/off'][op]:.2f}x, followed {found['followed/off'][op]:.2f}x"
        f" (off {found['ops_per_s'][op]['off']:,.0f}/s)"
        for op in OPS
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
                print(f"{name:15} clients={clients:<3} {_summary(found)}", flush=True)
    if args.json:
        print(json.dumps(results, indent=1))


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,8", help="client counts (default 1,8)")
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per cell")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three modes")
    parser.add_argument("--json", action="store_true", help="also print every figure as JSON")
    parser.add_argument("--follow", metavar="URL", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = _parse()
    if arguments.follow:
        asyncio.run(follow(arguments.follow, int(arguments.clients)))
    else:
        asyncio.run(main(arguments))
