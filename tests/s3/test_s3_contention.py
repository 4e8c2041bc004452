"""A write that keeps losing its header to other writers retries for a time, not a count:
on a loaded server attempts are slow to win and quick to lose, and four processes racing
appends on one key used up the 64 attempts a call once had (a ConflictError)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentstores import ConversationKey, Message
from agentstores.errors import ConflictError
from agentstores_s3 import S3Stores
from agentstores_s3 import header as header_module

KEY = ConversationKey("contention", "s")


def _losing(stores: S3Stores, losses: int) -> list[int]:
    """Make the bundle's header commits lose ``losses`` times (as if another writer had
    won each race: nothing is written), then go through; returns the count of attempts."""
    root = stores.conversations.root  # type: ignore[attr-defined]
    real = root.commit
    attempts = [0]

    def commit(*args: Any, **kwargs: Any) -> bool:
        attempts[0] += 1
        return real(*args, **kwargs) if attempts[0] > losses else False

    root.commit = commit
    return attempts


def test_a_write_losing_a_hundred_races_still_lands(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(header_module, "BACKOFF_CAP", 0.002)  # keep the test short

    async def main() -> None:
        async with S3Stores(url) as stores:
            attempts = _losing(stores, 100)
            await stores.conversations.append_messages(KEY, "p", [Message.user("hi", id="m1")])
            assert attempts[0] == 101
            assert [m.id for m in await stores.conversations.read_messages(KEY, "p")] == ["m1"]

    asyncio.run(main())


def test_a_write_that_never_wins_gives_up_at_its_deadline(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(header_module, "CONFLICT_DEADLINE", 0.5)
    monkeypatch.setattr(header_module, "BACKOFF_CAP", 0.01)

    async def main() -> None:
        async with S3Stores(url) as stores:
            _losing(stores, 10**9)
            with pytest.raises(ConflictError, match="kept changing"):
                await stores.conversations.append_messages(KEY, "p", [Message.user("x")])

    asyncio.run(main())
