"""Push: what it costs writers, and what it saves followers (a benchmark; it asserts nothing).

Three measurements on one backend, push on and off alternating in one run:

- writes: the same write workload (``cas`` takeovers, ``put`` snapshots, ``append``
  messages; each client its own key) with push off and on, nobody following and then
  with a follower per key in another bundle reading as ``follow()`` does (woken, else
  every ``safety_poll`` while pushed and every ``poll`` while not). Throughput on / off:
  the median of ``--pairs`` pairs of runs (each pair on fresh stores, the order
  alternating), with the range.
- idle: store reads per idle follower per second (nobody writes).
- latency: from a snapshot's write to the follower's read that first sees it.

::

    python -m tests.bench.push_cost --backend file --clients 1,8 --seconds 3
    python -m tests.bench.push_cost --backend mongo --clients 1,8 --seconds 3

``--backend mongo`` starts an nx-27017 (or uses ``$MONGODB_URI``) and gives every
configuration a fresh collection prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable

from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores

P = "owner"
POLL, SAFETY_POLL = 0.3, 2.0
"""follow()'s defaults."""
BODY = {"text": "x" * 1000}


class Backend:
    """Makes fresh bundles of one backend, push on or off."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._stack = contextlib.ExitStack()
        self.base = ""

    def __enter__(self) -> Backend:
        if self.name == "mongo":
            from tests.servers.mongo import mongo_base_url

            self.base = self._stack.enter_context(mongo_base_url())
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @contextlib.asynccontextmanager
    async def place(self) -> AsyncIterator[Callable[[bool], Stores]]:
        """A fresh store (directory or prefix), and how to open bundles on it."""
        if self.name == "file":
            from agentstores_file.stores import FileStores

            with tempfile.TemporaryDirectory() as tmp:
                yield lambda push: FileStores(f"file://{tmp}/store", push=push)
            return
        from agentstores_mongo.stores import MongoStores
        from tests.servers.mongo import Installation

        inst = Installation(self.base)
        await asyncio.to_thread(inst.install)
        try:
            yield lambda push: MongoStores(inst.url, push="auto" if push else "false")
        finally:
            await asyncio.to_thread(inst.drop)


async def _setup(stores: Stores, keys: list[ConversationKey]) -> None:
    for key in keys:
        assert await stores.supervision.compare_and_swap(
            key, P, None, SupervisionRow("running", "m", 1)
        )


class Writer:
    """One client's loop on its own key."""

    def __init__(self, stores: Stores, key: ConversationKey) -> None:
        self.stores, self.key = stores, key
        self.epoch, self.index, self.n = 1, 0, 0

    async def op(self, name: str) -> None:
        s, key = self.stores, self.key
        if name == "cas":
            row = SupervisionRow("running", "m", self.epoch + 1)
            assert await s.supervision.compare_and_swap(key, P, self.epoch, row)
            self.epoch += 1
        elif name == "put":
            self.index += 1
            event = RecordedEvent(self.index, BODY, "m", self.epoch)
            await s.recording.put(key, P, event)
        else:
            self.n += 1
            await s.conversations.append_messages(key, P, [Message(f"u{self.n}", "user", "q")])


class Followers:
    """A follower per key in another bundle, reading as follow() does."""

    def __init__(self, stores: Stores, keys: list[ConversationKey]) -> None:
        self.stores = stores
        self.reads = 0
        self.seen: dict[ConversationKey, tuple[int, float]] = {}
        self.changed = asyncio.Event()
        self.tasks = [asyncio.create_task(self._follow(key)) for key in keys]

    async def _follow(self, key: ConversationKey) -> None:
        with self.stores.wakeups.watch(key) as watch:
            while True:
                await self.stores.supervision.read(key, P)
                record = await self.stores.recording.read(key, P)
                self.reads += 1
                if record is not None and record.index != self.seen.get(key, (-1, 0))[0]:
                    self.seen[key] = (record.index, time.perf_counter())
                    self.changed.set()
                await watch.wait(SAFETY_POLL if watch.pushed else POLL)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def _bundles(
    backend: Backend, push: bool, clients: int, followed: bool
) -> AsyncIterator[tuple[list[Writer], Followers | None]]:
    async with backend.place() as make, make(push) as writing, make(push) as following:
        keys = [ConversationKey(f"b-{uuid.uuid4().hex[:8]}", "s") for _ in range(clients)]
        await _setup(writing, keys)
        followers = Followers(following, keys) if followed else None
        try:
            if followers is not None:
                await asyncio.sleep(0.5)  # subscribed, first reads done
            yield [Writer(writing, key) for key in keys], followers
        finally:
            if followers is not None:
                await followers.stop()


async def _throughput(writers: list[Writer], op: str, seconds: float) -> float:
    stop = time.perf_counter() + seconds
    done = 0

    async def loop(writer: Writer) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await writer.op(op)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in writers))
    return done / (time.perf_counter() - start)


async def writes(
    backend: Backend, clients: int, ops: list[str], seconds: float, pairs: int
) -> None:
    for followed in (False, True):
        ratios: dict[str, list[float]] = {op: [] for op in ops}
        rates: dict[tuple[bool, str], list[float]] = {}
        for pair in range(pairs):
            got: dict[tuple[bool, str], float] = {}
            for push in (False, True) if pair % 2 == 0 else (True, False):
                async with _bundles(backend, push, clients, followed) as (writers, _):
                    for op in ops:
                        got[push, op] = await _throughput(writers, op, seconds)
                        rates.setdefault((push, op), []).append(got[push, op])
            for op in ops:
                ratios[op].append(got[True, op] / got[False, op])
        who = "with a follower per key" if followed else "nobody following"
        cells = ", ".join(
            f"{op} {statistics.median(ratios[op]):.2f}x ({min(ratios[op]):.2f}-"
            f"{max(ratios[op]):.2f}; {statistics.median(rates[True, op]):.0f} vs "
            f"{statistics.median(rates[False, op]):.0f} ops/s)"
            for op in ops
        )
        print(f"writes, {clients} client(s), {who}: on/off {cells}", flush=True)


async def idle(backend: Backend, followers: int, seconds: float) -> None:
    for push in (False, True):
        async with _bundles(backend, push, followers, True) as (_, watching):
            assert watching is not None
            before = watching.reads
            await asyncio.sleep(seconds)
            rate = (watching.reads - before) / seconds / followers
        print(f"idle: push {'on ' if push else 'off'} {rate:.2f} reads per follower per second")


async def latency(backend: Backend, samples: int) -> None:
    for push in (False, True):
        async with _bundles(backend, push, 1, True) as (writers, watching):
            assert watching is not None
            writer, delays = writers[0], []
            for _ in range(samples):
                await writer.op("put")
                wrote = time.perf_counter()
                key = writer.key
                while watching.seen.get(key, (-1, 0.0))[0] != writer.index:
                    watching.changed.clear()
                    await watching.changed.wait()
                delays.append((watching.seen[key][1] - wrote) * 1000)
                await asyncio.sleep(0.05 + (len(delays) % 7) * 0.03)  # off the poll's phase
        delays.sort()
        p90 = delays[int(len(delays) * 0.9) - 1]
        print(
            f"latency: push {'on ' if push else 'off'} write -> follower's read "
            f"p50 {statistics.median(delays):.0f} ms, p90 {p90:.0f} ms ({samples} snapshots)"
        )


async def main(args: argparse.Namespace) -> None:
    ops = args.ops.split(",")
    with Backend(args.backend) as backend:
        await idle(backend, 8, args.seconds)
        await latency(backend, args.samples)
        for clients in (int(c) for c in args.clients.split(",")):
            await writes(backend, clients, ops, args.seconds, args.pairs)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", choices=("file", "mongo"), default="file")
    parser.add_argument("--clients", default="1,8")
    parser.add_argument("--ops", default="cas,put,append")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=3, help="on/off pairs per cell")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_parse()))

__all__: list[str] = []
