"""The id table (``ids-<gen>.tbl``) of a transcript, through the store's public calls.

What a user of the store relies on from it:

- it is a private file of 16 bytes a slot, rebuilt, at three times the ids rounded up
  to a power of two (64 slots at least), exactly when an append would leave it more
  than half full, and never in between (``_grow``);
- a slot left stale by a truncation is reused by the next append of its id, so
  truncating and re-appending over and over does not rebuild the table (nor does
  regenerating the last reply under its id, whose slot already points at its place);
- two ids whose hashes collide stay apart: every hit is checked against the record;
- appends that crashed before their commit leave slots behind, which may fill the
  table: a lookup then reads it at most once round, and the next append rebuilds it,
  keeping every id findable (a re-append stays a no-op).
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_file import transcript
from agentstores_file.fsio import FileIO
from agentstores_file.stores import FileStores
from agentstores_file.transcript import PROBE_CHUNK, SLOT, TABLE_MIN, id_hash


def _tables(kdir: str) -> list[str]:
    return sorted(n for n in os.listdir(kdir) if n.startswith("ids-") and n.endswith(".tbl"))


def _table(kdir: str) -> tuple[str, int, int]:
    """The key's one id table: its name, size in bytes and permission bits."""
    names = _tables(kdir)
    assert len(names) == 1, names
    st = os.stat(os.path.join(kdir, names[0]))
    return names[0], st.st_size, stat.S_IMODE(st.st_mode)


def _free_slots(kdir: str) -> list[int]:
    """How many slots are free in each id table file of the key."""
    free = []
    for name in _tables(kdir):
        raw = Path(kdir, name).read_bytes()
        free.append(sum(1 for _, seq1 in SLOT.iter_unpack(raw) if seq1 == 0))
    return free


def _capacity(ids: int) -> int:
    capacity = TABLE_MIN
    while capacity < 3 * ids:
        capacity *= 2
    return capacity


async def test_the_table_is_sized_as_the_format_says(tmp_path: Path) -> None:
    """After every append the table is one 0600 file of 16 bytes a slot, rebuilt exactly
    when the append would leave it more than half full (then at three times the ids,
    rounded up to a power of two, at least 64 slots) and the same file otherwise."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "size")
        kdir = stores.root.key_dir(key)
        sizes = [1] * 40 + [25] + [1] * 40 + [60]
        count, capacity, name = 0, 0, ""
        for batch, k in enumerate(sizes):
            msgs = [Message(f"b{batch}-{i}", "user", i) for i in range(k)]
            await conv.append_messages(key, "u", msgs)
            rebuilt = count + k > capacity // 2
            if rebuilt:
                capacity = _capacity(count + k)
            count += k
            now, size, mode = await asyncio.to_thread(_table, kdir)
            assert (size, mode) == (capacity * SLOT.size, 0o600), (count, size, capacity)
            assert (now != name) == rebuilt, (count, capacity)
            name = now
        assert capacity == 512  # the rule was met at 64, 128, 256 and 512 slots
        assert await conv.append_messages(key, "u", [Message("b0-0", "user", 0)]) == []


async def test_truncating_and_re_appending_reuses_the_stale_slots(tmp_path: Path) -> None:
    """Messages cut away leave their slots stale; appending the same ids again (here in
    turn at each other's places, from the first position on) reuses those slots, so more
    rounds of truncate-and-re-append than the table has slots never rebuild it, and each
    id is found. The two ids start half a table apart: neither ever probes the other's
    slots."""
    pair = ["w17", "w127"]
    assert [id_hash(i) % TABLE_MIN for i in pair] == [0, TABLE_MIN // 2]
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "stale")
        kdir = stores.root.key_dir(key)
        await conv.append_messages(key, "u", [Message(i, "user", i) for i in pair])
        first = await asyncio.to_thread(_table, kdir)
        for _ in range(TABLE_MIN):
            assert await conv.truncate(key, "u", pair[0], cut="before") == 2
            pair.reverse()
            await conv.append_messages(key, "u", [Message(i, "user", i) for i in pair])
        assert await asyncio.to_thread(_table, kdir) == first
        for i in pair:
            assert await conv.append_messages(key, "u", [Message(i, "user", i)]) == []
        assert [m.id for m in await conv.read_messages(key, "u")] == pair


async def test_regenerating_the_last_reply_under_its_id_keeps_the_one_table(
    tmp_path: Path,
) -> None:
    """Cutting the last reply and appending it again under the same id (a regenerated
    answer) finds its old slot already pointing at the same position and keeps it: a
    hundred regenerations leave the one table file the conversation started with."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "regenerate")
        kdir = stores.root.key_dir(key)
        await conv.append_messages(
            key, "u", [Message("q", "user", "q"), Message("a", "assistant", "a")]
        )
        first = await asyncio.to_thread(_table, kdir)
        for n in range(100):
            assert await conv.truncate(key, "u", "q", cut="after") == 1
            await conv.append_messages(key, "u", [Message("a", "assistant", f"a{n}")])
        assert await asyncio.to_thread(_table, kdir) == first
        assert [m.content for m in await conv.read_messages(key, "u")] == ["q", "a99"]
        assert await conv.append_messages(key, "u", [Message("a", "assistant", "x")]) == []


async def test_ids_whose_hashes_collide_stay_apart(
    stores: FileStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot names an id by its hash only; every hit is checked against the record, so
    ids with one hash (made here by a hash that maps every id alike) never shadow each
    other: each re-append is a no-op and a truncation cuts at the right one."""
    monkeypatch.setattr(transcript, "id_hash", lambda message_id: 0x1234)
    conv = stores.conversations
    key = ConversationKey("t", "collide")
    ids = ["p", "q", "r"]
    for i in ids:
        await conv.append_messages(key, "u", [Message(i, "user", i)])
    for i in ids:
        assert await conv.append_messages(key, "u", [Message(i, "user", i)]) == []
    assert [m.id for m in await conv.read_messages(key, "u")] == ids
    assert await conv.truncate(key, "u", "q", cut="before") == 2
    await conv.append_messages(key, "u", [Message("r", "user", "r"), Message("q", "user", "q")])
    for i in ids:
        assert await conv.append_messages(key, "u", [Message(i, "user", i)]) == []
    assert [m.id for m in await conv.read_messages(key, "u")] == ["p", "r", "q"]


class _Crash(BaseException):
    """Stops a call like SIGKILL would: no handler of the backend runs."""


class _TooManyReads(Exception):
    pass


class _CrashAndCount(FileIO):
    """Crashes an append just before its header is committed (when ``crash``), and
    counts the reads of the id tables present when ``watch`` was called, refusing to go
    on past ``budget`` of them (a lookup going round and round never ends)."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.crash = False
        self.inodes: set[int] = set()
        self.table_reads = 0
        self.budget = 0

    def watch(self, kdir: str, budget: int) -> None:
        self.inodes = {os.stat(os.path.join(kdir, n)).st_ino for n in _tables(kdir)}
        self.table_reads, self.budget = 0, budget

    def step(self, what: str, path: str) -> None:
        if self.crash and what == "create_tmp" and path.endswith(os.sep + ".head.tmp"):
            raise _Crash(path)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        if os.fstat(fd).st_ino in self.inodes:
            self.table_reads += 1
            if self.table_reads > self.budget:
                raise _TooManyReads(f"{self.table_reads} reads of the id table")
        return super().pread(fd, size, offset)


async def test_a_table_filled_by_crashed_appends_is_read_once_round_and_rebuilt(
    tmp_path: Path,
) -> None:
    """Appends that crash just before their commit leave a slot per message behind (the
    table's fill count is in the header they did not write), until the table is full. A
    lookup then reads it at most once round, the next append, finding no free slot,
    rebuilds it at twice the size, and every id it commits is found again; an id of a
    crashed append is not taken for a present one."""
    io = _CrashAndCount()
    url = f"file://{tmp_path / 'store'}"
    key = ConversationKey("t", "crashed")
    size = TABLE_MIN // 2 - 1  # the most one append takes without a rebuild, after "a"
    batches = [[Message(f"c{k}-{i}", "user", i) for i in range(size)] for k in range(4)]
    async with FileStores(url, io=io) as stores:
        kdir = stores.root.key_dir(key)
        await stores.conversations.append_messages(key, "u", [Message("a", "user", "a")])
    per_lookup = TABLE_MIN // PROBE_CHUNK + 1  # a probe may start mid-chunk
    io.crash = True
    for batch in batches[:3]:
        await asyncio.to_thread(io.watch, kdir, (2 * size + 1) * per_lookup)
        async with FileStores(url, io=io) as stores:
            with pytest.raises(_Crash):
                await stores.conversations.append_messages(key, "u", batch)
    io.crash = False
    # The scenario: the committed table has no free slot left (an unwritten fallback
    # table, twice as big, lies beside it).
    assert 0 in await asyncio.to_thread(_free_slots, kdir)
    await asyncio.to_thread(io.watch, kdir, (2 * size + 1) * per_lookup)
    async with FileStores(url, io=io) as stores:
        conv = stores.conversations
        assert len(await conv.append_messages(key, "u", batches[3])) == size
        # The batch's lookups and the insert that met no free slot read the full table
        # once round each.
        assert io.table_reads <= (size + 1) * per_lookup, io.table_reads
        io.inodes = set()  # the full table is gone: its inode may be another file's now
        for m in [Message("a", "user", "a"), *batches[3]]:  # committed before, and now
            assert await conv.append_messages(key, "u", [m]) == []
        assert len(await conv.append_messages(key, "u", batches[0])) == size
        ids = [m.id for m in await conv.read_messages(key, "u")]
        assert ids == ["a"] + [m.id for m in batches[3] + batches[0]]
    _, table_size, _ = await asyncio.to_thread(_table, kdir)
    assert table_size == 2 * TABLE_MIN * SLOT.size


@pytest.mark.parametrize("moved_to", [1, 5])
async def test_an_id_moved_by_a_truncation_keeps_one_slot(tmp_path: Path, moved_to: int) -> None:
    """An id appended again at another position after a truncation takes back its own
    stale slot (the first position's included) instead of a free one: the table holds one
    used slot per id of the transcript, however often ids move."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        conv = stores.conversations
        key = ConversationKey("t", f"moved{moved_to}")
        kdir = stores.root.key_dir(key)
        await conv.append_messages(key, "u", [Message("w17", "user", "first")])
        assert await conv.truncate(key, "u", "w17", cut="before") == 1
        fillers = [Message(f"f{i}", "user", i) for i in range(moved_to)]
        await conv.append_messages(key, "u", [*fillers, Message("w17", "user", "moved")])
        assert await asyncio.to_thread(_free_slots, kdir) == [TABLE_MIN - moved_to - 1]
        assert [m.id for m in await conv.read_messages(key, "u")][-1] == "w17"
