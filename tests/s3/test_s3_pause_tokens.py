"""Settled pause tokens are moved out of the key header (so it stays bounded however many
turns paused), and every one of them stays refused: claimed ones ``AlreadyClaimedError``,
expired ones ``ExpiredError``, abandoned ones claimable never again, and a ``put`` of any
settled id ``ConflictError``."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from agentstores.errors import AlreadyClaimedError, ConflictError, ExpiredError
from agentstores.keys import ConversationKey
from agentstores_s3 import S3Stores
from agentstores_s3.pause_tokens import SETTLED_KEPT

from .conftest import client_for

KEY = ConversationKey("tokens", "s")
TOKENS = SETTLED_KEPT + 6


def test_settled_tokens_leave_the_header_and_stay_refused(url: str) -> None:
    async def main() -> None:
        async with S3Stores(url) as stores:
            pt = stores.pause_tokens
            now = await stores.now()
            later = now + timedelta(hours=1)
            await pt.put("gone", KEY, "p", {"n": -1}, now + timedelta(seconds=2))
            sizes = []
            for n in range(TOKENS):
                await pt.put(f"t{n}", KEY, "p", {"n": n, "pad": "x" * 500}, later)
                if n % 3 == 2:
                    await pt.abandon(f"t{n}", KEY, "p")
                else:
                    assert await pt.claim(f"t{n}", KEY, "p") == {"n": n, "pad": "x" * 500}
                sizes.append(_header_size(url, stores))
            await asyncio.sleep(2.5)  # "gone" expires unclaimed
            await pt.put("last", KEY, "p", {"n": TOKENS}, later)
            assert max(sizes) <= sizes[SETTLED_KEPT - 1] + 256, sizes  # bounded
            header = _header(url, stores)
            assert len(header["tokens"]) <= SETTLED_KEPT + 1 and header["spilled"]
            assert "t0" not in header["tokens"] and "gone" not in header["tokens"]
            for n in range(TOKENS):
                with pytest.raises(AlreadyClaimedError):
                    await pt.claim(f"t{n}", KEY, "p")
                with pytest.raises(ConflictError):
                    await pt.put(f"t{n}", KEY, "p", {"again": n}, later)
                await pt.abandon(f"t{n}", KEY, "p")  # idempotent, claimable never again
            with pytest.raises(AlreadyClaimedError):
                await pt.claim("t0", KEY, "p")
            with pytest.raises(ExpiredError):
                await pt.claim("gone", KEY, "p")
            with pytest.raises(ConflictError):
                await pt.put("gone", KEY, "p", {"again": True}, later)
            assert await pt.claim("last", KEY, "p") == {"n": TOKENS}

    asyncio.run(main())


def _header(url: str, stores: S3Stores) -> dict:  # type: ignore[type-arg]
    import json

    raw = _raw(url, stores)
    return dict(json.loads(raw))


def _header_size(url: str, stores: S3Stores) -> int:
    return len(_raw(url, stores))


def _raw(url: str, stores: S3Stores) -> bytes:
    client = client_for(url)
    try:
        name = stores.io.prefix + f"k/{KEY.digest}/h"
        return bytes(client.get_object(Bucket=stores.io.bucket, Key=name)["Body"].read())
    finally:
        client.close()
