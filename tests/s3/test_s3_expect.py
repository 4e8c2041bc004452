"""Small PUT bodies go with their headers: botocore announces every PUT body with
``Expect: 100-continue`` and waits for the server's ``100 Continue`` before sending it,
one more round trip per write. Only bodies from 1 MiB (state blobs) keep the handshake."""

from __future__ import annotations

import asyncio
from typing import Any

from agentstores.keys import ConversationKey
from agentstores_s3 import S3Stores
from agentstores_s3.stores import EXPECT_CONTINUE_FROM

KEY = ConversationKey("expect", "s")


def test_only_large_bodies_wait_for_100_continue(url: str) -> None:
    async def main() -> None:
        async with S3Stores(url) as stores:
            sent: list[tuple[int, bool]] = []

            def record(request: Any, **_: Any) -> None:
                size = int(request.headers.get("Content-Length", 0))
                sent.append((size, request.headers.get("Expect") is not None))

            stores.io.client.meta.events.register("before-send.s3.PutObject", record)
            await stores.state.save(KEY, "p", {"small": 1})
            await stores.state.save(KEY, "p", {"large": "x" * (2 * EXPECT_CONTINUE_FROM)})
            small = [expect for size, expect in sent if size < EXPECT_CONTINUE_FROM]
            large = [expect for size, expect in sent if size >= EXPECT_CONTINUE_FROM]
            assert small and not any(small), sent
            assert large and all(large), sent
            assert await stores.state.load(KEY, "p") == {"large": "x" * (2 * EXPECT_CONTINUE_FROM)}

    asyncio.run(main())
