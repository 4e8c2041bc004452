"""S3: how long a crash restart of the journaled test server takes after ``--writes``
header rewrites, and how long a reader's call stalls across it (the figure a drill's
``dead_after`` must exceed)::

    python -m tests.bench.s3_restart --writes 3000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_s3 import S3Stores
from tests.servers.moto import MotoServer, use_test_credentials

BUCKET = "agentstores-restart"
KEY = ConversationKey("restart", "k")


async def measure(server: MotoServer, writes: int, watch: float) -> dict[str, float]:
    async with S3Stores(server.url(BUCKET, "r")) as stores:
        conv = stores.conversations
        began = time.perf_counter()
        await conv.append_messages(KEY, "p", [Message("m0", "user", 0)])
        for n in range(writes - 1):
            await conv.set_title(KEY, "p", f"title {n}")
        built = time.perf_counter() - began
        times: dict[str, float] = {}

        def crash() -> None:
            times["kill"] = time.perf_counter()
            server.restart(crash=True)
            times["up"] = time.perf_counter()

        timer = threading.Timer(0.5, crash)
        timer.start()
        worst, end = 0.0, time.perf_counter() + watch
        while time.perf_counter() < end:
            start = time.perf_counter()
            await conv.get_conversation(KEY, "p")
            worst = max(worst, time.perf_counter() - start)
            await asyncio.sleep(0.05)
        timer.join()
    return {
        "writes": writes,
        "build_seconds": round(built, 1),
        "outage_seconds": round(times["up"] - times["kill"], 2),
        "worst_call_stall_seconds": round(worst, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.s3_restart")
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--watch", type=float, default=12.0, help="seconds of reads")
    args = parser.parse_args(argv)
    use_test_credentials()
    with (
        tempfile.TemporaryDirectory() as scratch,
        MotoServer(journal=os.path.join(scratch, "journal")) as server,
    ):
        server.create_bucket(BUCKET)
        server.prepare_restarts(1)
        found = asyncio.run(measure(server, args.writes, args.watch))
    print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
