"""S3: how far the store clock of a process reads behind the server's, the margin
``dead_after`` needs on top of the heartbeat interval (README: the store clock).

The store clock is the local clock plus a lower bound of the server's offset, taken from
``Date`` headers of one-second resolution. Each of ``--processes`` fresh processes opens
a bundle on a moto server on this machine (so the server's true offset is zero and the
error is what the process reads), and reports its clock's error right after opening
(one ``Date`` seen) and after ``--requests`` more requests 25 ms apart::

    python -m tests.bench.s3_clock --processes 20 --requests 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from agentstores_s3 import S3Stores
from tests.servers.moto import MotoServer, use_test_credentials

BUCKET = "agentstores-clock"
SPACING = 0.025
"""Seconds between the later requests (50 of them span more than a second, so some
reply comes just after the server's clock ticks over a second)."""


async def probe(url: str, requests: int) -> dict[str, float]:
    """This process's clock error (store clock minus server clock, ms) after opening and
    after ``requests`` more requests."""
    async with S3Stores(url) as stores:
        first = (await stores.now()).timestamp() - time.time()
        for _ in range(requests):
            await asyncio.to_thread(stores.io.head_bucket)
            await asyncio.sleep(SPACING)
        later = (await stores.now()).timestamp() - time.time()
    return {"after_open_ms": round(first * 1000, 1), "after_more_ms": round(later * 1000, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.s3_clock")
    parser.add_argument("--processes", type=int, default=20)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    use_test_credentials()
    if args.probe:
        print(json.dumps(asyncio.run(probe(args.probe, args.requests))), flush=True)
        return 0
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    found: list[dict[str, float]] = []
    with MotoServer() as server:
        server.create_bucket(BUCKET)
        url = server.url(BUCKET, "clock")
        for _ in range(args.processes):
            command = [sys.executable, "-m", "tests.bench.s3_clock", "--probe", url]
            out = subprocess.run(
                [*command, "--requests", str(args.requests)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            found.append(json.loads(out.stdout))
    for name in ("after_open_ms", "after_more_ms"):
        values = [f[name] for f in found]
        line = {
            "when": name,
            "processes": len(values),
            "min": min(values),
            "median": round(statistics.median(values), 1),
            "max": max(values),
            "spread": round(max(values) - min(values), 1),
        }
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
