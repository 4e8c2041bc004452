"""Heartbeats written in place (format 2): what they cost, that a write cut at any byte
reads as the previous beat, that a takeover or a deletion hides the old generation's
slots, that a reader never mixes a header with another generation's heartbeat, and that
a format 1 directory is read as is and migrated on write."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentstores.errors import UnknownOutcomeError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow, Swap, SwapOutcome
from agentstores_file import beat, fsio
from agentstores_file.codec import dumps
from agentstores_file.fsio import FileIO, IOStats
from agentstores_file.stores import FileStores

from ._verify import verify_store
from .conftest import ManualClock

K = ConversationKey("t", "beating")
OWNER = "owner"


def _row(epoch: int, message_id: str = "turn", status: str = "running") -> SupervisionRow:
    return SupervisionRow(status, message_id, epoch)  # type: ignore[arg-type]


def _bytes(path: str | Path) -> bytes:
    return Path(path).read_bytes()


def _write(path: str | Path, data: bytes) -> None:
    Path(path).write_bytes(data)


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _files(stores: FileStores) -> tuple[str, str]:
    kdir = stores.root.key_dir(K)
    return os.path.join(kdir, "head"), os.path.join(kdir, beat.NAME)


async def test_a_heartbeat_after_the_first_is_one_overwrite_and_one_sync(tmp_path: Path) -> None:
    stats, clock = IOStats(), ManualClock()
    async with FileStores(f"file://{tmp_path}", io_stats=stats, clock=clock) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(3))
        head, beats = _files(stores)
        claimed = _bytes(head)
        assert _bytes(beats) == beat.BLANK  # the claim made it, with no slot written
        for n in range(4):
            clock.advance(1)
            stats.reset()
            assert await sup.compare_and_swap(K, OWNER, 3, _row(3, f"turn{n}", "done"))
            assert (stats.replaces, stats.writes, stats.syncs) == (0, 1, 1)
            assert stats.write_bytes == beat.SLOT
            view = await sup.read(K, OWNER)
            assert view.row is not None
            assert (view.row.status, view.row.message_id, view.row.epoch) == ("done", f"turn{n}", 3)
            assert view.row.heartbeat_at == clock.now and view.fence == 3
        assert _bytes(head) == claimed  # the header never moved
        assert await sup.compare_and_swap(K, OWNER, 3, _row(4))  # a takeover: the header
        assert _bytes(head) != claimed
    verify_store(str(tmp_path))


async def test_a_beat_cut_at_any_byte_reads_as_the_previous_one(tmp_path: Path) -> None:
    """Splice the first n bytes of the new slot over the old file, for every n: the
    read is the previous beat until every byte of the new slot is there (its padding
    already is), and the next beat works."""
    clock = ManualClock()
    base = tmp_path / "base"
    async with FileStores(f"file://{base}", clock=clock, fsync=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        for _ in range(3):  # both slots written: the cut overwrites a valid older slot
            clock.advance(1)
            assert await sup.compare_and_swap(K, OWNER, 1, _row(1, "old"))
        old_view = await sup.read(K, OWNER)
        _, beats = _files(stores)
        old = _bytes(beats)
        clock.advance(1)
        assert await sup.compare_and_swap(K, OWNER, 1, _row(1, "new"))
        new_view = await sup.read(K, OWNER)
        new = _bytes(beats)
    (at,) = {i // beat.SLOT for i in range(beat.SIZE) if old[i] != new[i]}
    start = at * beat.SLOT
    for n in [*range(0, beat.SLOT, 7), beat.SLOT - 1, beat.SLOT]:
        trial = tmp_path / f"cut{n}"
        shutil.copytree(base, trial)
        cut = old[:start] + new[start : start + n] + old[start + n :]
        _write(trial / Path(beats).relative_to(base), cut)
        async with FileStores(f"file://{trial}", clock=clock, fsync=False) as stores:
            view = await stores.supervision.read(K, OWNER)
            expect = new_view if cut == new else old_view  # whole once its bytes are in
            assert (view.row, view.fence) == (expect.row, expect.fence), n
            clock.advance(1)
            assert await stores.supervision.compare_and_swap(K, OWNER, 1, _row(1, "next"))
            view = await stores.supervision.read(K, OWNER)
            assert view.row is not None and view.row.message_id == "next"
        verify_store(str(trial))
        shutil.rmtree(trial)


async def test_a_new_generation_hides_the_old_ones_slots(tmp_path: Path) -> None:
    clock = ManualClock()
    async with FileStores(f"file://{tmp_path}", clock=clock) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        for n in range(3):
            clock.advance(1)
            assert await sup.compare_and_swap(K, OWNER, 1, _row(1, f"beat{n}", "errored"))
        clock.advance(1)
        assert await sup.compare_and_swap(K, OWNER, 1, _row(2, "taken"))  # the header
        taken_at = clock.now
        clock.advance(1)
        view = await sup.read(K, OWNER)
        assert view.row is not None
        assert (view.row.status, view.row.message_id, view.row.epoch) == ("running", "taken", 2)
        assert view.row.heartbeat_at == taken_at
        # Late beats of the old epoch lose; the new one's land.
        assert not await sup.compare_and_swap(K, OWNER, 1, _row(1, "late"))
        assert await sup.compare_and_swap(K, OWNER, 2, _row(2, "fresh"))
        view = await sup.read(K, OWNER)
        assert view.row is not None and (view.row.message_id, view.row.epoch) == ("fresh", 2)
        # A delete matches the row as beaten (its message id moved in place), and after
        # it the slots still in the file are never read as the row.
        assert not await sup.delete(K, OWNER, "taken", 2)
        assert await sup.delete(K, OWNER, "fresh", 2)
        assert (await sup.read(K, OWNER)).row is None
        assert not await sup.compare_and_swap(K, OWNER, 2, _row(2, "ghost"))
        assert await sup.compare_and_swap(K, OWNER, None, _row(3, "again"))
        view = await sup.read(K, OWNER)
        assert view.row is not None and (view.row.message_id, view.row.epoch) == ("again", 3)
    verify_store(str(tmp_path))


async def test_erasure_removes_the_heartbeat_file(tmp_path: Path) -> None:
    async with FileStores(f"file://{tmp_path}") as stores:
        assert await stores.supervision.compare_and_swap(K, OWNER, None, _row(1))
        await stores.conversations.append_messages(K, OWNER, [Message("m", "user", "hi")])
        for _ in range(2):
            assert await stores.supervision.compare_and_swap(K, OWNER, 1, _row(1))
        head, beats = _files(stores)
        assert _exists(beats)
        assert await stores.conversations.delete(K, OWNER)
        assert sorted(os.listdir(os.path.dirname(head))) == ["head", "lock"]
        assert (await stores.supervision.read(K, OWNER)).row is None


class HeaderMovesDuringRead(FileIO):
    """Just before a reader reads the heartbeat file, ``times`` times: a takeover
    replaces the header and the new producer beats twice, overwriting both slots. What
    a writer on another thread may do at that moment."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.times = 0
        self.stores: FileStores | None = None
        self.epoch = 1

    def read_file(self, path: str) -> bytes | None:
        if path.endswith("/" + beat.NAME) and self.times > 0 and self.stores is not None:
            self.times -= 1
            swap = self.stores.supervision._swap  # the blocking single path
            e = self.epoch
            assert swap(K, OWNER, e, _row(e + 1, f"took{e + 1}"))
            for _ in range(2):
                assert swap(K, OWNER, e + 1, _row(e + 1, f"beat{e + 1}", "done"))
            self.epoch = e + 1
        return super().read_file(path)


async def test_a_read_never_joins_a_header_to_another_generations_beat(tmp_path: Path) -> None:
    """Without the second look at the header, the reader would return the old epoch's
    row as the header had it, a state gone before its read began."""
    io = HeaderMovesDuringRead()
    async with FileStores(f"file://{tmp_path}", io=io) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        for _ in range(2):
            assert await sup.compare_and_swap(K, OWNER, 1, _row(1, "beaten", "done"))
        io.stores = stores
        for moves in (1, 2):  # after two, the read takes the shared lock
            io.times = moves
            view = await sup.read(K, OWNER)
            assert io.times == 0
            assert view.row is not None
            got = (view.row.epoch, view.row.status, view.row.message_id, view.fence)
            assert got == (io.epoch, "done", f"beat{io.epoch}", io.epoch), moves


async def test_a_format_1_directory_is_read_then_migrated_on_write(tmp_path: Path) -> None:
    """A store written before heartbeat files: its marker is format 1 and its rows have
    no generation. It opens, reads as it was, and its first heartbeat per key goes
    through the header (giving the row a generation); later ones go in place."""
    url = f"file://{tmp_path}"
    clock = ManualClock()
    async with FileStores(url, clock=clock) as stores:
        assert await stores.supervision.compare_and_swap(K, OWNER, None, _row(5, "v1"))
        head, beats = _files(stores)
    # Rewrite what this version wrote as format 1 wrote it.
    old_head = json.loads(_bytes(head))
    del old_head["sup"]["g"]
    _write(head, dumps(old_head))
    os.unlink(beats)
    _write(tmp_path / "FORMAT", b"agentstores-file 1\n")
    stats = IOStats()
    async with FileStores(url, clock=clock, io_stats=stats) as stores:
        assert _bytes(tmp_path / "FORMAT") == b"agentstores-file 2\n"
        view = await stores.supervision.read(K, OWNER)
        assert view.row is not None and (view.row.message_id, view.row.epoch) == ("v1", 5)
        clock.advance(1)
        stats.reset()
        assert await stores.supervision.compare_and_swap(K, OWNER, 5, _row(5, "v2"))
        assert stats.replaces == 1 and not _exists(beats)  # migrated: the header
        assert "g" in json.loads(_bytes(head))["sup"]
        stats.reset()
        clock.advance(1)
        assert await stores.supervision.compare_and_swap(K, OWNER, 5, _row(5, "first"))
        assert stats.replaces == 1 and len(_bytes(beats)) == beat.SIZE  # the file, whole
        for n in range(3):
            clock.advance(1)
            assert await stores.supervision.compare_and_swap(K, OWNER, 5, _row(5, f"v{n + 3}"))
        stats.reset()
        assert await stores.supervision.compare_and_swap(K, OWNER, 5, _row(5, "last"))
        assert stats.replaces == 0
        view = await stores.supervision.read(K, OWNER)
        assert view.row is not None and (view.row.message_id, view.row.heartbeat_at) == (
            "last",
            clock.now,
        )
    verify_store(str(tmp_path))


def test_a_forked_child_draws_other_generations_on_a_pool_of_its_own() -> None:
    """Generations come from a per-process generator and calls run on a process-wide
    pool, both kept without a system call per use: a forked child must reseed the one
    (or it would give a takeover the generation its parent gives next, so the parent's
    slots would read as the child's row) and make the other anew (its threads are gone)."""
    from agentstores_file._base import shared_pool
    from agentstores_file.supervision import _generations

    parent_pool = shared_pool()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        fresh = shared_pool() is not parent_pool and shared_pool().submit(int, "7").result() == 7
        drawn = [_generations.getrandbits(63) for _ in range(8)]
        os.write(write, json.dumps([fresh, drawn]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        fresh, child = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert fresh
    parent = [_generations.getrandbits(63) for _ in range(8)]
    assert not set(child) & set(parent)


def test_forgetting_the_pool_makes_the_next_call_start_one() -> None:
    """What the fork hook does to the pool, seen in this process (the mutation tool maps
    only the calls a test makes in its own process): after it, the next call gets a new
    working pool (the one before is left to the threads it has)."""
    from agentstores_file import _base

    before = _base.shared_pool()
    try:
        _base._forget_shared()
        after = _base.shared_pool()
        assert isinstance(after, ThreadPoolExecutor) and after is not before
        assert after.submit(int, "7").result(10) == 7
        after.shutdown()
    finally:
        _base._shared = before


BATCH = [ConversationKey("t", f"batch{i}") for i in range(8)]


async def _beat_batch(stores: FileStores, clock: ManualClock, status: str) -> list[SwapOutcome]:
    """Claim every key of BATCH (once), then one batch of heartbeats over all of them."""
    sup = stores.supervision
    for key in BATCH:
        if (await sup.read(key, OWNER)).row is None:
            assert await sup.compare_and_swap(key, OWNER, None, _row(2))
    clock.advance(1)
    beats = [Swap(k, OWNER, 2, _row(2, "turn", status)) for k in BATCH]
    return list(await sup.compare_and_swap_many(beats))


async def test_a_batch_of_heartbeats_is_made_durable_by_one_flush(tmp_path: Path) -> None:
    """Eight beats in place, one syncfs for all (where the OS has it: Linux 5.8 and
    later), and every row reads its own beat."""
    stats, clock = IOStats(), ManualClock()
    async with FileStores(f"file://{tmp_path}", io_stats=stats, clock=clock) as stores:
        await _beat_batch(stores, clock, "running")
        stats.reset()
        outcomes = await _beat_batch(stores, clock, "done")
        assert [o.swapped for o in outcomes] == [True] * len(BATCH)
        assert (stats.replaces, stats.writes) == (0, len(BATCH))
        assert stats.syncs == (1 if fsio._syncfs is not None else len(BATCH))
        for key in BATCH:
            view = await stores.supervision.read(key, OWNER)
            assert view.row is not None and view.row.status == "done"
            assert view.row.heartbeat_at == clock.now


async def test_a_failed_flush_leaves_every_beat_of_the_batch_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """syncfs failing (a writeback error on the filesystem) is never reported as a
    durable beat: every row it was to flush is an unknown outcome."""
    if fsio._syncfs is None:
        pytest.skip("no syncfs(2) here: beats are fdatasynced one by one")
    clock = ManualClock()
    async with FileStores(f"file://{tmp_path}", clock=clock) as stores:
        await _beat_batch(stores, clock, "running")

        def failing(fd: int) -> int:
            ctypes.set_errno(errno.EIO)
            return -1

        monkeypatch.setattr(fsio, "_syncfs", failing)
        outcomes = await _beat_batch(stores, clock, "done")
    for outcome in outcomes:
        assert not outcome.swapped
        assert isinstance(outcome.error, UnknownOutcomeError)
        assert "syncfs" in str(outcome.error)
