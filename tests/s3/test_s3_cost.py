"""Costs that do not grow with the transcript, counted in requests and rounds (waits for
the server): an append and a read by index make the same requests at 1,000 messages as at
100 (the header, the new message's id check, the copy-out of the message leaving the
header's window, the commit; the header and the message object), and no more at 10,
where the whole transcript is in the header. With ``concurrent_requests`` (the default)
they also wait for the server as many times at 10 as at 1,000 (2 and 1)."""

from __future__ import annotations

import asyncio

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_s3 import RequestStats, S3Stores


def _costs(url: str, length: int, concurrent: bool | None) -> dict[str, dict[str, int]]:
    """What each call costs at ``length``; ``concurrent`` None: the default setting."""

    async def main() -> dict[str, dict[str, int]]:
        stats = RequestStats()
        async with S3Stores(url, stats=stats, concurrent_requests=concurrent) as stores:
            conv = stores.conversations
            key = ConversationKey("cost", f"len-{length}-{concurrent}")
            done = 0
            while done < length - 1:
                n = min(500, length - 1 - done)
                batch = [Message(f"m{done + i}", "user", {"i": done + i}) for i in range(n)]
                await conv.append_messages(key, "p", batch)
                done += n
            await conv.append_messages(key, "p", [Message(f"m{done}", "assistant", "x")])
            await stores.now()  # the clock is fresh: no HEAD inside the measured calls
            found: dict[str, dict[str, int]] = {}
            stats.reset()
            await conv.append_messages(key, "p", [Message("next", "user", "y")])
            found["append"] = stats.snapshot()
            for name, index in (("first", 0), ("middle", length // 2), ("last", -1)):
                stats.reset()
                rows = await conv.get_transcript(key, "p", index=index)
                assert len(rows) == 1
                found[f"index {name}"] = stats.snapshot()
            return found

    return asyncio.run(main())


def _total(costs: dict[str, int]) -> int:
    return sum(n for kind, n in costs.items() if kind != "rounds")


def _counts(gets: int, puts: int, rounds: int) -> dict[str, int]:
    return {"gets": gets, "puts": puts, "deletes": 0, "lists": 0, "heads": 0, "rounds": rounds}


def test_append_and_indexed_read_cost_the_same_at_any_length(url: str) -> None:
    tiny, short, long = (_costs(url, n, concurrent=False) for n in (10, 100, 1000))
    assert short == long, f"at 100 messages: {short}\nat 1,000 messages: {long}"
    assert all(_total(tiny[call]) <= _total(long[call]) for call in long), (tiny, long)
    assert long["append"] == _counts(gets=2, puts=3, rounds=5)
    assert tiny["append"] == _counts(gets=1, puts=1, rounds=2)
    assert long["index middle"] == long["index first"] == _counts(gets=2, puts=0, rounds=2)
    assert long["index last"] == tiny["index middle"] == _counts(gets=1, puts=0, rounds=1)


def test_by_default_calls_wait_as_often_at_10_as_at_1000(url: str) -> None:
    """``concurrent_requests``, on by default: the same requests, sent together where
    they follow from the header the bundle saw last, so an append waits for the server
    twice and a read by index once at any length."""
    tiny, short, long = (_costs(url, n, concurrent=None) for n in (10, 100, 1000))
    assert short == long, f"at 100 messages: {short}\nat 1,000 messages: {long}"
    assert all(tiny[call]["rounds"] == long[call]["rounds"] for call in long), (tiny, long)
    assert long["append"] == _counts(gets=2, puts=3, rounds=2)
    assert tiny["append"] == _counts(gets=1, puts=1, rounds=2)
    assert long["index middle"] == long["index first"] == _counts(gets=2, puts=0, rounds=1)
    assert long["index last"] == tiny["index middle"] == _counts(gets=1, puts=0, rounds=1)


def test_tail_within_the_window_is_the_header_alone(url: str) -> None:
    """``tail`` reads the header, which holds the newest rows: one GET while the rows
    asked for are in its window, then one more GET per older row (sent together)."""

    async def main() -> dict[int, dict[str, int]]:
        stats = RequestStats()
        async with S3Stores(url, stats=stats) as stores:
            conv = stores.conversations
            key = ConversationKey("cost", "tail")
            await conv.append_messages(key, "p", [Message(f"m{i}", "user", i) for i in range(60)])
            await conv.append_messages(key, "p", [Message("last", "assistant", "x")])
            await stores.now()
            found: dict[int, dict[str, int]] = {}
            for limit in (0, 20, 32, 40):
                stats.reset()
                tail = await conv.tail(key, "p", limit)
                assert tail is not None and tail.info.message_count == 61
                assert [m.seq for m in tail.messages] == list(range(61 - limit, 61))
                assert tail.messages[-1].id == "last" if limit else tail.messages == []
                found[limit] = stats.snapshot()
            return found

    costs = asyncio.run(main())
    for limit in (0, 20, 32):
        assert costs[limit] == _counts(gets=1, puts=0, rounds=1), (limit, costs)
    assert costs[40] == _counts(gets=9, puts=0, rounds=2), costs
