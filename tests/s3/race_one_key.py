"""N processes append pairs of messages to one key on a private moto server, each in a
loop, for some seconds; each prints how many appends it made and its longest wait. The
measure of how fair the header race is under contention (packages/agentstores-s3/README.md,
"A key's turn").

    python -m tests.s3.race_one_key [PROCESSES] [SECONDS]     (default 6 processes, 30 s)
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

from tests.servers.moto import MotoServer, use_test_credentials

CHILD = r"""
import asyncio, json, sys, time
from agentstores import ConversationKey, Message, open_stores
from agentstores.errors import ConflictError

async def main(url: str, worker: str, seconds: float) -> None:
    key = ConversationKey("race", "one-key")
    waits, gave_up, n = [], 0, 0
    async with open_stores(url) as stores:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            began = time.monotonic()
            mid = f"{worker}-{n}"
            pair = [Message(mid, "user", "q"), Message(mid + "b", "assistant", "a")]
            try:
                await stores.conversations.append_messages(key, "p", pair)
            except ConflictError:
                gave_up += 1
            waits.append(time.monotonic() - began)
            n += 1
    waits.sort()
    median, longest = round(waits[len(waits) // 2], 3), round(waits[-1], 3)
    print(json.dumps({"worker": worker, "appends": n - gave_up, "gave_up": gave_up,
                      "median_s": median, "longest_s": longest}))

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""


def main(argv: list[str]) -> None:
    processes = int(argv[0]) if argv else 6
    seconds = argv[1] if len(argv) > 1 else "30"
    use_test_credentials()
    with MotoServer() as server:
        import boto3

        bucket = f"race-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1").create_bucket(
            Bucket=bucket
        )
        url = server.url(bucket)
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, url, f"w{i}", seconds],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(processes)
        ]
        results = [json.loads(w.communicate()[0]) for w in workers]
    for r in results:
        print(json.dumps(r))
    print(
        json.dumps(
            {
                "appends": sum(r["appends"] for r in results),
                "longest_s": max(r["longest_s"] for r in results),
                "gave_up": sum(r["gave_up"] for r in results),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
