"""The lease row on files: the heartbeat file's layout (slots and sequence numbers), what
a batch row gets back when its heartbeat fails, the headers a batch keeps parsed, a
row's delete under the key's exclusive lock, and the change check that wakes followers
(what it sees, what it counts, and that it sleeps once nobody watches)."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentstores.errors import BackendUnavailableError, NotOwnedError, UnknownOutcomeError
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, Swap
from agentstores.stores.wakeups import Wakeups
from agentstores_file import beat
from agentstores_file.codec import dumps
from agentstores_file.fsio import FileIO
from agentstores_file.header import FileRoot, Head
from agentstores_file.push import ChangeWatcher
from agentstores_file.stores import FileStores
from agentstores_file.supervision import current_row

from .conftest import ManualClock

OWNER = "owner"
K = ConversationKey("t", "lease")
K2 = ConversationKey("t", "lease2")


def _row(epoch: int, message_id: str = "turn", status: str = "running") -> SupervisionRow:
    return SupervisionRow(status, message_id, epoch)  # type: ignore[arg-type]


def _beat_file(stores: FileStores, key: ConversationKey) -> str:
    return os.path.join(stores.root.key_dir(key), beat.NAME)


def _layout(raw: bytes) -> list[tuple[int, int, int, str, str] | None]:
    """Each slot of a heartbeat file as (slot, seq, hb, status, message id), or None."""
    return [
        None if s is None else (s.slot, s.seq, s.hb, s.status, s.message_id)
        for s in beat.slots(raw, "test")
    ]


def _bytes(path: str) -> bytes:
    return Path(path).read_bytes()


def _write(path: str, data: bytes) -> None:
    Path(path).write_bytes(data)


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


class DirSyncs(FileIO):
    """Records every directory sync."""

    def __init__(self) -> None:
        super().__init__(fsync=True)
        self.dirs: list[str] = []

    def sync_dir(self, path: str) -> None:
        self.dirs.append(path)
        super().sync_dir(path)


async def test_a_claim_writes_its_blank_heartbeat_file_and_header_with_one_dir_sync(
    tmp_path: Path,
) -> None:
    """A claim of a key without a heartbeat file writes a blank one beside the header:
    both renames are made durable by one sync of the key's directory, not one each."""
    io = DirSyncs()
    async with FileStores(f"file://{tmp_path}", io=io) as stores:
        sup = stores.supervision
        kdir = stores.root.key_dir(K)
        io.dirs.clear()
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))  # a new key
        assert _bytes(_beat_file(stores, K)) == beat.BLANK
        assert io.dirs.count(kdir) == 1, io.dirs
        # Again on a key whose directory is there: its row deleted, its file gone.
        assert await sup.delete(K, OWNER, "turn", 1)
        os.unlink(_beat_file(stores, K))
        io.dirs.clear()
        assert await sup.compare_and_swap(K, OWNER, None, _row(2))
        assert _bytes(_beat_file(stores, K)) == beat.BLANK
        assert io.dirs == [kdir]


async def test_every_rows_generation_is_a_fresh_63_bit_number(tmp_path: Path) -> None:
    """Each claim and takeover gives the row a fresh random generation of 63 bits (as
    documented: it fits a signed 64-bit integer wherever the header is read)."""
    async with FileStores(f"file://{tmp_path}", fsync=False) as stores:
        sup = stores.supervision
        kdir = stores.root.key_dir(K)
        drawn = []
        for epoch in range(1, 49):
            assert await sup.compare_and_swap(
                K, OWNER, None if epoch == 1 else epoch - 1, _row(epoch)
            )
            head = stores.root.load_head(kdir)
            assert head is not None
            drawn.append(head["sup"]["g"])
    assert all(isinstance(g, int) and 0 <= g < 2**63 for g in drawn), max(drawn)
    assert len(set(drawn)) == len(drawn)


async def test_a_swap_keeping_an_epoch_above_the_fence_raises_the_fence(tmp_path: Path) -> None:
    """A successful swap raises the key's fence to its epoch: a header whose fence is
    below its row's epoch (written by hand, or by another tool) takes a same-epoch swap
    through the header, raising the fence, not as a heartbeat in place."""
    async with FileStores(f"file://{tmp_path}", fsync=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(3))
        path = stores.root.head_path(stores.root.key_dir(K))
        head = json.loads(_bytes(path))
        assert head["fence"] == 3
        head["fence"] = 1
        _write(path, dumps(head))
        assert (await sup.read(K, OWNER)).fence == 1
        assert await sup.compare_and_swap(K, OWNER, 3, _row(3, "again"))
        view = await sup.read(K, OWNER)
        assert view.fence == 3
        assert view.row is not None and (view.row.epoch, view.row.message_id) == (3, "again")


# --- the heartbeat file's layout ----------------------------------------------------


async def test_heartbeats_alternate_slots_with_sequence_numbers_counting_from_one(
    tmp_path: Path,
) -> None:
    """The documented layout: a claim's blank file takes its first beat in slot 0 with
    sequence 1, and each next beat goes to the other slot, one above the newest."""
    clock = ManualClock()
    async with FileStores(f"file://{tmp_path}", clock=clock, fsync=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        path = _beat_file(stores, K)
        assert _bytes(path) == beat.BLANK
        seen = []
        for n in range(1, 5):
            clock.advance(1)
            assert await sup.compare_and_swap(K, OWNER, 1, _row(1, f"m{n}"))
            seen.append([s and s[:2] for s in _layout(_bytes(path))])
    assert seen == [
        [(0, 1), None],
        [(0, 1), (1, 2)],
        [(0, 3), (1, 2)],
        [(0, 3), (1, 4)],
    ]


async def test_a_heartbeat_file_written_whole_matches_one_written_in_place(
    tmp_path: Path,
) -> None:
    """A key whose heartbeat file is missing (a claim's blank file lost) gets it whole on
    its first beat: the same slots, sequence numbers and contents as a key whose first
    beat went in place into its blank file, single call or batch alike."""
    clock = ManualClock()
    keys = [ConversationKey("t", f"whole{i}") for i in range(4)]
    async with FileStores(f"file://{tmp_path}", clock=clock, fsync=False) as stores:
        sup = stores.supervision
        for key in keys:
            assert await sup.compare_and_swap(key, OWNER, None, _row(1))
        for key in keys[1::2]:
            os.unlink(_beat_file(stores, key))
        for n in range(1, 4):
            clock.advance(1)
            if n == 1:  # the first beats: one batch (the group path) for all four
                batch = [Swap(k, OWNER, 1, _row(1, "m1")) for k in keys]
                out = await sup.compare_and_swap_many(batch)
                assert [(o.swapped, o.error) for o in out] == [(True, None)] * len(keys)
            else:
                for key in keys:
                    assert await sup.compare_and_swap(key, OWNER, 1, _row(1, f"m{n}"))
            layouts = [_layout(_bytes(_beat_file(stores, k))) for k in keys]
            assert all(layout == layouts[0] for layout in layouts), n
        # And the single call's whole file: one more key, its file lost, one beat.
        single = ConversationKey("t", "single")
        assert await sup.compare_and_swap(single, OWNER, None, _row(1))
        os.unlink(_beat_file(stores, single))
        clock.advance(1)
        assert await sup.compare_and_swap(single, OWNER, 1, _row(1, "m"))
        whole = _layout(_bytes(_beat_file(stores, single)))
        assert whole == [(0, 1, stores.root.now_us(), "running", "m"), None]


async def test_a_heartbeat_file_of_the_wrong_size_is_refused_by_name(tmp_path: Path) -> None:
    """A heartbeat file cut to the wrong size is corruption: a read and a beat are each
    refused with an error that names the key's heartbeat file, and nothing is written."""
    async with FileStores(f"file://{tmp_path}", fsync=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        path = _beat_file(stores, K)
        _write(path, bytes(100))
        what = f"heartbeat file of {stores.root.key_dir(K)} is 100 bytes"
        with pytest.raises(BackendUnavailableError) as caught:
            await sup.read(K, OWNER)
        assert what in str(caught.value), str(caught.value)
        with pytest.raises(BackendUnavailableError) as caught:
            await sup.compare_and_swap(K, OWNER, 1, _row(1, "beat"))
        assert what in str(caught.value), str(caught.value)
        assert _bytes(path) == bytes(100)


def _file(*slots: bytes) -> bytes:
    return b"".join(slots) + bytes(beat.SIZE - sum(map(len, slots)))


def _slot(seq: int, gen: int = 7, hb: int = 0) -> bytes:
    return beat.encode(seq, gen, hb, "running", f"m{seq}-{hb}")


EMPTY_SLOT = bytes(beat.SLOT)
TORN_SLOT = _slot(9)[:30] + bytes(beat.SLOT - 30)  # cut inside its fixed fields


@pytest.mark.parametrize(
    "raw",
    [
        _file(_slot(1)),
        _file(EMPTY_SLOT, _slot(1)),
        _file(_slot(1), _slot(2)),
        _file(_slot(3), _slot(2)),
        _file(_slot(0)),
        _file(EMPTY_SLOT, _slot(0)),
        _file(_slot(5, hb=1), _slot(5, hb=2)),
        _file(TORN_SLOT, _slot(4)),
        _file(_slot(4), TORN_SLOT),
    ],
    ids=["one", "one-in-1", "two", "two-top-0", "seq0", "seq0-in-1", "tie", "torn0", "torn1"],
)
def test_the_next_write_never_overwrites_the_beat_a_reader_takes(raw: bytes) -> None:
    """Whatever valid slots a heartbeat file holds (sequence 0, a tie, a torn slot
    beside one whole), the next write goes to the slot a reader does not take as the
    newest and carries a sequence number above every valid one: a write cut at any
    byte leaves the beat a reader saw before."""
    offset, seq = beat.next_write(raw, "test")
    assert offset in (0, beat.SLOT)
    newest = beat.newest(raw, 7, "test")
    assert newest is not None and newest.slot in (0, 1)
    assert offset // beat.SLOT != newest.slot
    assert seq > max(s.seq for s in beat.slots(raw, "test") if s is not None)


def test_a_blank_heartbeat_files_first_write_is_slot_0_sequence_1() -> None:
    assert beat.slots(_file(TORN_SLOT, TORN_SLOT), "test") == (None, None)
    """A blank file (what a claim writes) and one torn in both slots take their next beat
    in slot 0 with sequence 1: what a file written whole holds."""
    assert beat.next_write(beat.BLANK, "test") == (0, 1)
    assert beat.next_write(_file(TORN_SLOT, TORN_SLOT), "test") == (0, 1)


async def test_the_current_row_is_the_headers_row_with_its_newest_beat_over_it(
    tmp_path: Path,
) -> None:
    """``current_row`` (what reads, deletes and the store verifier see) is the header's
    row in the header's own shape, the generation it belongs to included, with the
    newest beat of that generation over it."""
    clock = ManualClock()
    async with FileStores(f"file://{tmp_path}", clock=clock, fsync=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(4))
        root, kdir = stores.root, stores.root.key_dir(K)
        head = root.load_head(kdir)
        assert head is not None
        assert current_row(root, kdir, head) == head["sup"]  # no beat yet: the base
        for n in range(3):
            clock.advance(1)
            assert await sup.compare_and_swap(K, OWNER, 4, _row(4, f"m{n}", "done"))
        assert root.load_head(kdir) == head  # beats never touch the header
        base = head["sup"]
        assert current_row(root, kdir, head) == {
            "s": "done",
            "m": "m2",
            "e": 4,
            "hb": root.now_us(),
            "g": base["g"],
        }


# --- batches -------------------------------------------------------------------------


class FaultyIO(FileIO):
    """Fails the fsync of one path's temp file, or the in-place write of one file."""

    def __init__(self) -> None:
        super().__init__(fsync=True)
        self.fail_sync: str | None = None
        self.fail_pwrite: str | None = None

    def sync(self, fd: int) -> None:
        if self.fail_sync is not None and _fd_path(fd) == self.fail_sync:
            raise OSError(errno.EIO, "injected fsync failure")
        super().sync(fd)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
        if self.fail_pwrite is not None and _fd_path(fd) == self.fail_pwrite:
            os.pwrite(fd, bytes(data)[:40], offset)  # a part landed before the error
            raise OSError(errno.EIO, "injected write failure")
        super().pwrite(fd, data, offset)


async def _two_claimed(url: str, io: FileIO) -> FileStores:
    stores = FileStores(url, io=io)
    await stores.__aenter__()
    for key in (K, K2):
        assert await stores.supervision.compare_and_swap(key, OWNER, None, _row(1))
    return stores


def _beats() -> list[Swap]:
    return [Swap(key, OWNER, 1, _row(1, "beat")) for key in (K, K2)]


async def test_a_batch_beat_cut_in_its_in_place_write_is_an_unknown_outcome(
    tmp_path: Path,
) -> None:
    """A heartbeat whose in-place write fails part way may have landed (readers see the
    file at once): in a batch its row is an unknown outcome, as the single call
    raises, never a definite failure; the other row lands."""
    io = FaultyIO()
    stores = await _two_claimed(f"file://{tmp_path}", io)
    try:
        io.fail_pwrite = _beat_file(stores, K2)
        out = await stores.supervision.compare_and_swap_many(_beats())
        assert (out[0].swapped, out[0].error) == (True, None)
        assert out[1].swapped is False
        assert isinstance(out[1].error, UnknownOutcomeError), repr(out[1].error)
        assert out[1].error.key == K2
        with pytest.raises(UnknownOutcomeError):
            await stores.supervision.compare_and_swap(K2, OWNER, 1, _row(1, "single"))
    finally:
        await stores.__aexit__(None, None, None)


async def test_a_batch_beat_whose_whole_file_never_landed_fails_definitely(
    tmp_path: Path,
) -> None:
    """A heartbeat of a key without a heartbeat file writes the file whole: when its temp
    file's fsync fails nothing was renamed, so in a batch the row fails definitely
    (not an unknown outcome), the key stays without the file, and the other row lands."""
    io = FaultyIO()
    stores = await _two_claimed(f"file://{tmp_path}", io)
    try:
        path = _beat_file(stores, K2)
        os.unlink(path)
        io.fail_sync = io.tmp_path(path)
        out = await stores.supervision.compare_and_swap_many(_beats())
        assert (out[0].swapped, out[0].error) == (True, None)
        assert out[1].swapped is False
        assert isinstance(out[1].error, BackendUnavailableError), repr(out[1].error)
        assert not isinstance(out[1].error, UnknownOutcomeError), "nothing was renamed"
        assert out[1].error.key == K2
        assert not _exists(path)
        view = await stores.supervision.read(K2, OWNER)
        assert view.row is not None and view.row.message_id == "turn"
    finally:
        await stores.__aexit__(None, None, None)


class CountingRoot(FileRoot):
    """Counts the headers parsed from bytes and checked against a key."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parsed = 0
        self.checked = 0

    def parse_head(self, raw: bytes | None, kdir: str) -> Head | None:
        self.parsed += 1
        return super().parse_head(raw, kdir)

    def checked_head(self, head: Head | None, key: ConversationKey) -> Head | None:  # type: ignore[override]
        self.checked += 1
        return FileRoot.checked_head(head, key)


class CountingStores(FileStores):
    root_class = CountingRoot


async def test_a_takeover_single_or_batched_keeps_the_header_it_wrote_parsed(
    tmp_path: Path,
) -> None:
    """A header this process wrote for a key is kept parsed with its bytes: after a
    batch's takeovers (like after a single one) the key's next heartbeat neither parses
    the header again nor checks it against the key again."""
    async with CountingStores(f"file://{tmp_path}", fsync=False) as stores:
        root = stores.root
        assert isinstance(root, CountingRoot)
        sup = stores.supervision
        for key in (K, K2):
            assert await sup.compare_and_swap(key, OWNER, None, _row(1))
        # The single path first, as the baseline.
        assert await sup.compare_and_swap(K, OWNER, 1, _row(2))
        root.parsed = root.checked = 0
        assert await sup.compare_and_swap(K, OWNER, 2, _row(2, "beat"))
        assert (root.parsed, root.checked) == (0, 0)
        # A batch of takeovers: the group path.
        out = await sup.compare_and_swap_many(
            [Swap(K, OWNER, 2, _row(3)), Swap(K2, OWNER, 1, _row(3))]
        )
        assert [(o.swapped, o.error) for o in out] == [(True, None)] * 2
        for key in (K, K2):
            root.parsed = root.checked = 0
            assert await sup.compare_and_swap(key, OWNER, 3, _row(3, "beat"))
            assert (root.parsed, root.checked) == (0, 0), key
        view = await sup.read(K2, OWNER)
        assert view.row is not None and (view.row.epoch, view.row.message_id) == (3, "beat")


# --- delete ----------------------------------------------------------------------------


async def test_a_rows_delete_waits_for_a_holder_of_the_keys_shared_lock(tmp_path: Path) -> None:
    """A delete rewrites the header under the key's exclusive lock: while a reader holds
    the shared lock (as a transcript read does) it waits, and then removes the row."""
    async with FileStores(f"file://{tmp_path}", fsync=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        lock = os.open(stores.root.lock_path(stores.root.key_dir(K)), os.O_RDWR)
        try:
            fcntl.flock(lock, fcntl.LOCK_SH)
            deleting = asyncio.ensure_future(sup.delete(K, OWNER, "turn", 1))
            done, _ = await asyncio.wait({deleting}, timeout=0.5)
            assert not done, "the delete ran beside a holder of the shared lock"
            fcntl.flock(lock, fcntl.LOCK_UN)
        finally:
            os.close(lock)
        assert await asyncio.wait_for(deleting, 10)
        assert (await sup.read(K, OWNER)).row is None


async def test_a_delete_by_another_principal_is_refused_naming_the_key(tmp_path: Path) -> None:
    """Another principal's delete is NotOwnedError for the key it named; the row stays."""
    async with FileStores(f"file://{tmp_path}", fsync=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        with pytest.raises(NotOwnedError) as caught:
            await sup.delete(K, "intruder", "turn", 1)
        assert caught.value.key == K
        assert (await sup.read(K, OWNER)).row is not None


# --- the change check -----------------------------------------------------------------


async def test_the_change_check_sees_each_kind_of_write_once_and_counts(tmp_path: Path) -> None:
    """One check round reports the watched keys whose files changed since the last: a
    takeover (the header replaced, the heartbeat file untouched) and a heartbeat (the
    heartbeat file overwritten in place) each once, an idle round nothing; ``rounds``
    counts the rounds and ``changes`` the key changes seen."""
    clock = ManualClock()
    async with FileStores(f"file://{tmp_path}", clock=clock, fsync=False, push=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        assert await sup.compare_and_swap(K, OWNER, 1, _row(1, "beat"))
        watcher = ChangeWatcher(stores.root, Wakeups(), interval=3600)  # checked by hand
        await watcher._subscribe({K, K2})
        assert watcher._check() == []
        beats = _bytes(_beat_file(stores, K))
        clock.advance(1)
        assert await sup.compare_and_swap(K, OWNER, 1, _row(2))  # a takeover
        assert _bytes(_beat_file(stores, K)) == beats  # only the header moved
        assert watcher._check() == [K]
        assert watcher._check() == []
        clock.advance(1)
        assert await sup.compare_and_swap(K, OWNER, 2, _row(2, "beat2"))  # a heartbeat
        assert watcher._check() == [K]
        assert watcher._check() == []
        assert (watcher.rounds, watcher.changes) == (5, 2)


async def _until(check: Callable[[], bool], within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "not within the patience"
        await asyncio.sleep(0.01)


async def test_the_check_thread_runs_while_a_key_is_watched_and_sleeps_after(
    tmp_path: Path,
) -> None:
    """The check thread keeps checking while any key is watched (one of two dropped
    leaves the other pushed) and sleeps once nobody watches: no round runs then."""
    async with FileStores(f"file://{tmp_path}", fsync=False) as stores:
        watcher = stores.watcher
        assert watcher is not None
        first = stores.wakeups.watch(K)
        second = stores.wakeups.watch(K2)
        await _until(lambda: watcher.active == {K, K2})
        first.close()
        await _until(lambda: watcher.active == {K2})
        rounds = watcher.rounds
        await _until(lambda: watcher.rounds > rounds + 2, within=3.0)  # K2 is still checked
        second.close()
        await _until(lambda: not watcher.active)
        rounds, settle = -1, asyncio.get_running_loop().time() + 10
        while rounds != watcher.rounds:  # a round begun before the drop ends (however slow)
            assert asyncio.get_running_loop().time() < settle, "the thread never went idle"
            rounds = watcher.rounds
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # twenty intervals
        assert watcher.rounds == rounds, "the thread checks files nobody watches"
