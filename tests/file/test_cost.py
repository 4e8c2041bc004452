"""Cost at 100,000 messages against cost at 10, counted in file operations, not seconds.

Every read and write of the backend goes through its ``FileIO``; an ``IOStats`` counts
calls and bytes. An append, an indexed read (speaker-filtered and negative too), a
``recent``, a ``tail`` and an idempotent re-append must cost about the same on a
100,000-message transcript as on a 10-message one; a time-range read may grow only with
log2(n).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_file.fsio import FileIO, IOStats
from agentstores_file.stores import FileStores
from agentstores_file.transcript import READ_CHUNK

BIG = 100_000
SMALL = 10
ROLES = ("user", "assistant", "tool")


def _message(i: int) -> Message:
    return Message(f"m{i}", ROLES[i % 3], {"text": "hello " * 5, "i": i}, {"n": i})


async def _fill(stores: FileStores, key: ConversationKey, n: int) -> None:
    for start in range(0, n, 1000):
        batch = [_message(i) for i in range(start, min(n, start + 1000))]
        await stores.conversations.append_messages(key, "owner", batch)


async def _measure(stores: FileStores, stats: IOStats, key: ConversationKey) -> dict[str, Any]:
    conv = stores.conversations
    # Warm up: the first fsync after the unsynced fill flushes the whole fill.
    await conv.append_messages(key, "owner", [Message("warm", "assistant", "x")])
    calls: dict[str, Any] = {
        "append": lambda: conv.append_messages(key, "owner", [Message("new-1", "user", "hi")]),
        "append_batch": lambda: conv.append_messages(
            key, "owner", [Message(f"new-b{i}", ROLES[i % 3], {"i": i}) for i in range(5)]
        ),
        "reappend": lambda: conv.append_messages(key, "owner", [Message("m3", "user", "x")]),
        "index_first": lambda: conv.get_transcript(key, "owner", index=0),
        "index_last": lambda: conv.get_transcript(key, "owner", index=-1),
        "user_index": lambda: conv.get_transcript(key, "owner", index=2, speaker="user"),
        "user_negative": lambda: conv.get_transcript(key, "owner", index=-2, speaker="user"),
        "assistant_negative": lambda: conv.get_transcript(
            key, "owner", index=-1, speaker="assistant"
        ),
        "recent": lambda: conv.recent(key, "owner", 4),
        "tail": lambda: conv.tail(key, "owner", 4),
        "info": lambda: conv.get_conversation(key, "owner"),
    }
    costs: dict[str, Any] = {}
    for name, call in calls.items():
        stats.reset()
        result = await call()
        costs[name] = (stats.snapshot(), result)
    now = await stores.now()
    stats.reset()
    found = await conv.get_transcript(key, "owner", time_range=(now, now))
    costs["time_range"] = (stats.snapshot(), found)
    return costs


async def test_append_and_indexed_reads_cost_the_same_at_100k(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store'}"
    small, big = ConversationKey("t", "small"), ConversationKey("t", "big")
    async with FileStores(url, fsync=False) as filling:
        await _fill(filling, small, SMALL)
        await _fill(filling, big, BIG)
    stats = IOStats()
    async with FileStores(url, io_stats=stats) as stores:
        at_small = await _measure(stores, stats, small)
        at_big = await _measure(stores, stats, big)

    for name in at_small:
        cs, cb = at_small[name][0], at_big[name][0]
        if name == "time_range":
            continue
        assert cb["reads"] <= 1.5 * max(cs["reads"], 1), (name, cs, cb)
        assert cb["read_bytes"] <= 1.5 * max(cs["read_bytes"], 1), (name, cs, cb)
        assert cb["writes"] <= 1.5 * max(cs["writes"], 1), (name, cs, cb)
        assert cb["write_bytes"] <= 1.5 * max(cs["write_bytes"], 1), (name, cs, cb)
        assert cb["syncs"] == cs["syncs"], (name, cs, cb)
        assert cb["read_bytes"] < 8192, (name, cb)

    # The calls did what they say, on both sizes.
    for costs, n in ((at_small, SMALL), (at_big, BIG)):
        assert len(costs["append"][1]) == 1 and costs["append"][1][0].seq == n + 1
        assert [m.seq for m in costs["append_batch"][1]] == list(range(n + 2, n + 7))
        assert costs["reappend"][1] == []
        assert costs["index_first"][1][0].id == "m0"
        assert costs["index_last"][1][0].id == "new-b4"
        users = [i for i in range(n) if i % 3 == 0]
        assert costs["user_index"][1][0].id == f"m{users[2]}"
        assert costs["user_index"][1][0].index == 2
        # users: the filled ones, then "new-1", then "new-b0" and "new-b3".
        assert costs["user_negative"][1][0].id == "new-b0"
        assert costs["user_negative"][1][0].index == len(users) + 1
        assert costs["assistant_negative"][1][0].id == "new-b4"
        assert [m.id for m in costs["recent"][1]] == ["new-b0", "new-b1", "new-b3", "new-b4"]
        assert costs["info"][1].message_count == n + 7
        assert [m.id for m in costs["tail"][1].messages] == [f"new-b{i}" for i in range(1, 5)]
        assert costs["tail"][1].info == costs["info"][1]
        # Everything appended in the measurement shares the clock's current microsecond
        # or is older; a one-instant range finds only what was stamped at that instant.
        assert costs["time_range"][1] == [] or costs["time_range"][1][-1].id == "new-b4"

    # A time range is two binary searches over the fixed-width index.
    searches = 2 * (math.ceil(math.log2(BIG + 8)) + 1)
    assert at_big["time_range"][0]["reads"] <= searches + 4, at_big["time_range"][0]


def test_the_counts_are_of_calls_and_bytes(tmp_path: Path) -> None:
    """What ``IOStats`` counts, exactly: one read per whole-file read and per positioned
    read, the bytes each returned; one write and its bytes per positioned write."""
    stats = IOStats()
    io = FileIO(fsync=False, stats=stats)
    path = str(tmp_path / "data")
    io.replace_file(path, b"0123456789" * 10)
    stats.reset()
    assert io.read_file(path) == b"0123456789" * 10
    fd = os.open(path, os.O_RDWR)
    try:
        assert io.pread(fd, 25, 10) == (b"0123456789" * 4)[:25]
        assert io.pread(fd, 50, 90) == b"0123456789"  # short only at the end of the file
        io.pwrite(fd, b"abc", 0)
    finally:
        os.close(fd)
    counted = stats.snapshot()
    assert counted["reads"] == 3 and counted["read_bytes"] == 100 + 25 + 10, counted
    assert counted["writes"] == 1 and counted["write_bytes"] == 3, counted


async def test_a_page_of_messages_costs_the_reads_of_one(tmp_path: Path) -> None:
    """Consecutive messages are read with one read of the index and one of the records
    for the whole page (up to 8 MiB): a page of 40 costs the reads a page of 1 does, in
    the whole transcript and in a speaker's view whose messages follow each other."""
    stats = IOStats()
    async with FileStores(f"file://{tmp_path / 'store'}", io_stats=stats) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "page")
        await conv.append_messages(key, "owner", [Message(f"u{i}", "user", i) for i in range(50)])
        for speaker in ("all", "user"):
            reads = []
            for limit in (1, 40):
                stats.reset()
                page = await conv.get_transcript(key, "owner", speaker=speaker, limit=limit)
                assert [m.id for m in page] == [f"u{i}" for i in range(limit)]
                reads.append(stats.snapshot()["reads"])
            assert reads[1] == reads[0], (speaker, reads)


class _Preads(FileIO):
    """Records the size of every positioned read."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.sizes: list[int] = []

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        self.sizes.append(size)
        return super().pread(fd, size, offset)


async def test_records_are_read_8_mib_at_a_time(tmp_path: Path) -> None:
    """Consecutive records are read together up to 8 MiB a read, and never more: nine
    records of exactly 1 MiB take one read of 8 MiB and one of the ninth."""
    record = READ_CHUNK // 8
    framing = 24  # the record's JSON around a string content, with a two-character id
    io = _Preads()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "big")
        for i in range(9):
            await conv.append_messages(
                key, "owner", [Message(f"m{i}", "user", "x" * (record - framing))]
            )
        io.sizes.clear()
        page = await conv.get_transcript(key, "owner", limit=9)
    assert [m.id for m in page] == [f"m{i}" for i in range(9)]
    assert [size for size in io.sizes if size >= record] == [READ_CHUNK, record], io.sizes
