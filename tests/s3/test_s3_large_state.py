"""State of 8 MiB and more: one PUT of the whole blob (S3 takes up to 5 GiB in one, and
core caps state at 64 MiB encoded), committed by the conditional header write like any
other save: it round-trips whole, and a fenced save below the fence changes nothing."""

from __future__ import annotations

import asyncio

import pytest

from agentstores.errors import FencedError
from agentstores.keys import ConversationKey
from agentstores_s3 import S3Stores

KEY = ConversationKey("large", "s")
MIB = 1024 * 1024


def test_a_state_above_8_mib_round_trips_and_is_fenced(url: str) -> None:
    async def main() -> None:
        async with S3Stores(url) as stores:
            first = {"blob": "a" * (9 * MIB), "n": 1}
            await stores.state.save(KEY, "p", first, epoch=2)
            assert await stores.state.load(KEY, "p") == first
            with pytest.raises(FencedError):
                await stores.state.save(KEY, "p", {"blob": "b" * (9 * MIB)}, epoch=1)
            assert await stores.state.load(KEY, "p") == first
            second = {"blob": "c" * (17 * MIB), "n": 2}
            await stores.state.save(KEY, "p", second, epoch=3)
            assert await stores.state.load(KEY, "p") == second

    asyncio.run(main())
