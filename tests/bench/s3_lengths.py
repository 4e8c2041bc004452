"""S3: append and read-by-index cost at 10 messages and at long lengths, in requests per
call (counted by ``RequestStats``) and in latency, measured in alternating rounds.

The long transcript is built through the adapter itself (appends of 1,000 messages:
every message is copied out to its own objects, so building 100,000 messages costs about
300,000 requests and takes long on moto). Figures are printed as JSON lines at each
checkpoint length as the transcript grows, so a run cut short still reports::

    python -m tests.bench.s3_lengths --lengths 1000,10000,100000 --calls 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_s3 import RequestStats, S3Stores
from tests.servers.moto import MotoServer, use_test_credentials

BATCH = 1000


def _messages(prefix: str, start: int, count: int) -> list[Message]:
    return [
        Message(f"{prefix}{n}", "user" if n % 2 == 0 else "assistant", {"text": f"m {n}"})
        for n in range(start, start + count)
    ]


async def _measure(
    stores: S3Stores, stats: RequestStats, key: ConversationKey, length: int, calls: int
) -> dict[str, list[tuple[float, int]]]:
    """``calls`` appends (each truncated back, untimed) and indexed reads on ``key``."""
    conv = stores.conversations
    out: dict[str, list[tuple[float, int]]] = {"append": [], "read": []}

    async def timed(fn: Callable[[], Awaitable[object]]) -> tuple[float, int]:
        await stores.now()  # a fresh clock: no HEAD inside the measured call
        stats.reset()
        t0 = time.perf_counter()
        await fn()
        return (time.perf_counter() - t0) * 1000, stats.total

    for n in range(calls):
        msg = Message(f"x{length}-{n}", "user", {"text": "lorem ipsum " * 8})
        out["append"].append(await timed(lambda m=msg: conv.append_messages(key, "p", [m])))
        await conv.truncate(key, "p", msg.id)
        index = (n * 7919) % length
        out["read"].append(await timed(lambda i=index: conv.get_transcript(key, "p", index=i)))
    return out


def _summary(samples: list[tuple[float, int]]) -> dict[str, object]:
    ms = [s[0] for s in samples]
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "requests_per_call": sorted({s[1] for s in samples}),
    }


async def run(url: str, lengths: Sequence[int], calls: int, rounds: int) -> None:
    stats = RequestStats()
    async with S3Stores(url, stats=stats) as stores:
        short = ConversationKey("lengths", "short")
        await stores.conversations.append_messages(short, "p", _messages("s", 0, 10))
        long = ConversationKey("lengths", "long")
        built, began = 0, time.perf_counter()
        for length in sorted(lengths):
            while built < length:
                n = min(BATCH, length - built)
                await stores.conversations.append_messages(long, "p", _messages("b", built, n))
                built += n
            at: dict[str, list[tuple[float, int]]] = {"append": [], "read": []}
            ten: dict[str, list[tuple[float, int]]] = {"append": [], "read": []}
            for r in range(rounds):  # alternating: short long, long short, ...
                order = [(short, 10, ten), (long, length, at)]
                for key, size, into in order if r % 2 == 0 else order[::-1]:
                    got = await _measure(stores, stats, key, size, calls)
                    for name in into:
                        into[name] += got[name]
            line = {
                "length": length,
                "build_seconds_so_far": round(time.perf_counter() - began, 1),
                "at_10": {k: _summary(v) for k, v in ten.items()},
                f"at_{length}": {k: _summary(v) for k, v in at.items()},
                "latency_ratio": {
                    k: round(
                        statistics.median(s[0] for s in at[k])
                        / statistics.median(s[0] for s in ten[k]),
                        3,
                    )
                    for k in at
                },
            }
            print(json.dumps(line), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.s3_lengths")
    parser.add_argument("--lengths", default="1000,10000,100000")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.lengths.split(",") if n]
    use_test_credentials()
    with MotoServer() as server:
        server.create_bucket("agentstores-bench")
        asyncio.run(
            run(server.url("agentstores-bench", "lengths"), lengths, args.calls, args.rounds)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
