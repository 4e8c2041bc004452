"""A write that keeps losing its header to other writers retries for a time, not a count:
on a loaded server attempts are slow to win and quick to lose, and four processes racing
appends on one key used up the 64 attempts a call once had (a ConflictError)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentstores import ConversationKey, Message
from agentstores.errors import ConflictError
from agentstores_s3 import S3Stores, turns
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


def test_a_write_that_keeps_losing_takes_the_turn_and_gives_it_back(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(header_module, "BACKOFF_CAP", 0.01)
    monkeypatch.setattr(turns, "TURN_AFTER", 0.1)

    async def main() -> None:
        async with S3Stores(url) as stores:
            root = stores.conversations.root  # type: ignore[attr-defined]
            put = root.io.put
            turns_taken: list[str] = []

            def recording_put(name: str, body: bytes, **kwargs: Any) -> str | None:
                if name.endswith("/turn"):
                    turns_taken.append(name)
                return put(name, body, **kwargs)

            root.io.put = recording_put
            _losing(stores, 40)
            await stores.conversations.append_messages(KEY, "p", [Message.user("x", id="m1")])
            assert turns_taken == [root.key_dir(KEY) + "turn"]
            assert root.io.get(root.key_dir(KEY) + "turn") is None  # given back

    asyncio.run(main())


def test_a_contender_lets_the_turn_holder_write_first(url: str) -> None:
    """Another writer holds the key's turn: a bundle that lost a race on the key lately
    waits until the turn is given back (or lapses); one that never lost ignores it."""

    async def main() -> None:
        async with S3Stores(url) as holder, S3Stores(url) as contender, S3Stores(url) as calm:
            await calm.conversations.append_messages(KEY, "p", [Message.user("a", id="m0")])
            root = holder.conversations.root  # type: ignore[attr-defined]
            turn = turns.Turn(root, KEY)
            turn.held = turn._take()
            assert turn.held is not None
            contender.conversations.root.contend(KEY)  # type: ignore[attr-defined]
            waiting = asyncio.create_task(
                contender.conversations.append_messages(KEY, "p", [Message.user("c", id="m2")])
            )
            await asyncio.sleep(0.5)
            assert not waiting.done()
            await calm.conversations.append_messages(KEY, "p", [Message.user("b", id="m1")])
            turn.release()
            await waiting
            ids = [m.id for m in await calm.conversations.read_messages(KEY, "p")]
            assert ids == ["m0", "m1", "m2"]

    asyncio.run(main())


def test_a_turn_whose_holder_died_lapses(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "TURN_LEASE_US", 300_000)

    async def main() -> None:
        async with S3Stores(url) as holder, S3Stores(url) as contender:
            root = holder.conversations.root  # type: ignore[attr-defined]
            assert turns.Turn(root, KEY)._take() is not None  # never given back
            contender.conversations.root.contend(KEY)  # type: ignore[attr-defined]
            await asyncio.wait_for(
                contender.conversations.append_messages(KEY, "p", [Message.user("c")]), 10
            )
            taker = turns.Turn(contender.conversations.root, KEY)  # type: ignore[attr-defined]
            assert taker._take() is not None  # the lapsed turn is taken over

    asyncio.run(main())
