"""The raw floor ``agentstores bench`` compares the adapter with: a boto3 GET +
``If-Match`` PUT per call, correct on single-threaded moto (each in-order call wins, a
stale expectation loses)."""

from __future__ import annotations

import asyncio

from agentstores_tools.floors.s3 import S3Floor
from tests.servers.moto import MotoServer

from .conftest import BUCKET, with_prefix


def test_the_floor_swaps_in_order_and_refuses_a_stale_value(moto_server: MotoServer) -> None:
    async def main() -> None:
        floor = S3Floor()
        await floor.setup(with_prefix(moto_server.url(BUCKET)), 4)
        try:
            for op in range(3):
                assert all(await asyncio.gather(*(floor.cas(c, op) for c in range(4))))
            assert not await floor.cas(0, 1), "a CAS expecting a stale value won"
        finally:
            await floor.close()

    asyncio.run(main())
