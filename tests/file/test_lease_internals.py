"""The lease store's reads and locks, and what it keeps between calls.

Reads: a read that finds nothing to join (no row, a row deleted, a key its reader may
not see) reads the header once and takes no lock; a read whose header keeps moving
falls back to the key's shared lock, so it never waits for another reader, sees the
key as it is then (erased included) and creates nothing on disk, even for a key whose
directory went away. Writes: every swap, a new key's claim included, holds the key's
exclusive lock. Kept between calls: a header read before and unchanged is not parsed
or checked again (per key directory), a key's paths are built once, both kept within
``HEADS_KEPT`` entries, and a header that does not parse is reported naming its key's
directory.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentstores.errors import BackendUnavailableError
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow
from agentstores_file import beat, supervision
from agentstores_file.fsio import FileIO
from agentstores_file.stores import FileStores

from . import test_lease_files as lease_files

OWNER = "owner"
K = ConversationKey("t", "internals")
K2 = ConversationKey("t", "internals2")


def _row(epoch: int, message_id: str = "turn", status: str = "running") -> SupervisionRow:
    return SupervisionRow(status, message_id, epoch)  # type: ignore[arg-type]


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _bytes(path: str) -> bytes:
    return Path(path).read_bytes()


def _write(path: str, data: bytes) -> None:
    Path(path).write_bytes(data)


class WatchedIO(FileIO):
    """Records the reader's flocks (lock file, exclusive or not) and header reads. A
    flock that would wait for another holder is recorded in ``waited``, then taken once
    that holder (``holder``, a shared lock the test planted) lets go. ``moves`` run one
    each just before a key's heartbeat file is read: what writers on other threads may
    do at that moment (their own locks and reads are not recorded)."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.locks: list[tuple[str, bool]] = []
        self.waited: list[tuple[str, bool]] = []
        self.head_reads = 0
        self.moves: list[Callable[[], None]] = []
        self.moving = False
        self.holder: int | None = None

    def forget(self) -> None:
        self.locks.clear()
        self.waited.clear()
        self.head_reads = 0

    def read_file(self, path: str) -> bytes | None:
        if path.endswith("/head") and not self.moving:
            self.head_reads += 1
        elif path.endswith("/" + beat.NAME) and self.moves and not self.moving:
            move = self.moves.pop(0)
            self.moving = True
            try:
                move()
            finally:
                self.moving = False
        return super().read_file(path)

    def hold_shared(self, lock_path: str) -> None:
        """Another reader takes the key's shared lock (as a transcript read does)."""
        fd = os.open(lock_path, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_SH)
        self.holder = fd

    def let_go(self) -> None:
        fd, self.holder = self.holder, None
        if fd is not None:
            os.close(fd)

    def lock(self, fd: int, *, exclusive: bool) -> None:
        taken = (_fd_path(fd), bool(exclusive))
        if not self.moving:
            self.locks.append(taken)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            self.waited.append(taken)
            self.let_go()
            super().lock(fd, exclusive=exclusive)


def _takeover(stores: FileStores, key: ConversationKey, epochs: list[int]) -> Callable[[], None]:
    """A move: the owner takes the key over at the next epoch (the blocking single path)."""

    def move() -> None:
        e = epochs[-1]
        assert stores.supervision._swap(key, OWNER, e, _row(e + 1, f"took{e + 1}"))
        epochs.append(e + 1)

    return move


# --- reads -----------------------------------------------------------------------------


async def test_a_read_that_finds_nothing_to_join_takes_no_lock_and_reads_the_header_once(
    tmp_path: Path,
) -> None:
    """A header with no heartbeat to join (no key, a deleted row, a key the reader may
    not see) is the whole answer: one header read, no lock. A live row reads the header
    again after its heartbeat file, still without a lock."""
    io = WatchedIO()
    async with FileStores(f"file://{tmp_path}", io=io, push=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        assert await sup.compare_and_swap(K2, OWNER, None, _row(1))
        assert await sup.delete(K2, OWNER, "turn", 1)
        for key, reader, fence in (
            (K, "stranger", 0),  # not shared with this principal
            (K2, OWNER, 1),  # its row deleted
            (ConversationKey("t", "never"), OWNER, 0),  # never written
        ):
            io.forget()
            view = await sup.read(key, reader)
            assert (view.row, view.fence) == (None, fence), key
            assert (io.head_reads, io.locks) == (1, []), (key, reader)
        io.forget()
        view = await sup.read(K, OWNER)
        assert view.row is not None and view.row.epoch == 1
        assert (io.head_reads, io.locks) == (2, [])


async def test_a_read_falling_back_to_the_lock_takes_it_shared_and_never_waits_for_a_reader(
    tmp_path: Path,
) -> None:
    """A read whose header moved on both lock-free tries takes the key's shared lock:
    another reader holding it then (as a transcript read does) does not hold it up, and
    it returns the row as the last takeover left it."""
    io = WatchedIO()
    async with FileStores(f"file://{tmp_path}", io=io, push=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        lock = stores.root.lock_path(stores.root.key_dir(K))
        epochs = [1]
        takeover = _takeover(stores, K, epochs)

        def takeover_then_a_reader_arrives() -> None:
            takeover()
            io.hold_shared(lock)

        io.moves = [takeover, takeover_then_a_reader_arrives]
        io.forget()
        try:
            view = await sup.read(K, OWNER)
            assert io.moves == []
            assert io.waited == [], "the read waited for another reader"
            assert io.locks == [(lock, False)]
        finally:
            io.let_go()
        assert view.row is not None
        assert (view.row.epoch, view.row.message_id, view.fence) == (3, "took3", 3)


async def test_a_read_racing_an_erasure_sees_no_row(tmp_path: Path) -> None:
    """A key erased while a read retries (its header moved on both tries, the second
    time to a tombstone) reads under the lock as what it now is: erased, no row."""
    io = WatchedIO()
    async with FileStores(f"file://{tmp_path}", io=io, push=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        convs = stores.conversations
        erase: Any = convs._erase.__wrapped__  # type: ignore[attr-defined]

        def erased() -> None:
            assert erase(convs, K, OWNER, None)

        io.moves = [_takeover(stores, K, [1]), erased]
        io.forget()
        view = await sup.read(K, OWNER)
        assert io.moves == []
        assert (view.row, view.fence) == (None, 0)
        assert io.locks == [(stores.root.lock_path(stores.root.key_dir(K)), False)]


async def test_a_read_never_creates_the_key_it_reads(tmp_path: Path) -> None:
    """A read writes nothing: a key never written gets no directory, and neither does
    one whose directory went away while the read retried (its fallback to the key's
    lock finds no lock file and takes none)."""
    io = WatchedIO()
    async with FileStores(f"file://{tmp_path}", io=io, push=False) as stores:
        sup = stores.supervision
        never = ConversationKey("t", "never")
        assert (await sup.read(never, OWNER)).row is None
        assert not _exists(stores.root.key_dir(never))
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        kdir = stores.root.key_dir(K)

        def vanished() -> None:
            shutil.rmtree(kdir)

        io.moves = [_takeover(stores, K, [1]), vanished]
        io.forget()
        view = await sup.read(K, OWNER)
        assert io.moves == []
        assert (view.row, view.fence) == (None, 0)
        assert not _exists(kdir), "a read made the key's directory"
        assert io.locks == []


# --- writes ----------------------------------------------------------------------------


async def test_every_swap_holds_the_keys_exclusive_lock_a_new_keys_claim_too(
    tmp_path: Path,
) -> None:
    """A claim of a key with no directory yet (made under the lock), a heartbeat and a
    takeover each hold the key's exclusive lock, as every writer of the key does."""
    io = WatchedIO()
    async with FileStores(f"file://{tmp_path}", io=io, push=False) as stores:
        sup = stores.supervision
        lock = stores.root.lock_path(stores.root.key_dir(K))
        for expected, row in ((None, _row(1)), (1, _row(1, "beat")), (1, _row(2))):
            io.forget()
            assert await sup.compare_and_swap(K, OWNER, expected, row)
            assert io.locks == [(lock, True)], (expected, row)
        assert io.waited == []


# --- what is kept between calls --------------------------------------------------------


class CountingRoot(lease_files.CountingRoot):
    """Counts key directories built too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dirs = 0

    def key_dir(self, key: ConversationKey) -> str:
        self.dirs += 1
        return super().key_dir(key)


class CountingStores(FileStores):
    root_class = CountingRoot


async def test_a_second_look_at_an_unchanged_header_costs_no_parse_per_key(
    tmp_path: Path,
) -> None:
    """Headers another process wrote: the first read of each key parses and checks its
    header, a later read of the same bytes neither, with reads of other keys between
    (each key directory keeps its own)."""
    url = f"file://{tmp_path}"
    async with FileStores(url, fsync=False, push=False) as writer:
        for key in (K, K2):
            assert await writer.supervision.compare_and_swap(key, OWNER, None, _row(1))
            assert await writer.supervision.compare_and_swap(key, OWNER, 1, _row(1, "beat"))
    async with CountingStores(url, fsync=False, push=False) as stores:
        root = stores.root
        assert isinstance(root, CountingRoot)
        costs = []
        for key in (K, K2, K, K2):
            root.parsed = root.checked = 0
            view = await stores.supervision.read(key, OWNER)
            assert view.row is not None and view.row.message_id == "beat"
            costs.append((root.parsed, root.checked))
        assert costs == [(1, 1), (1, 1), (0, 0), (0, 0)]


async def test_a_keys_paths_are_built_once(tmp_path: Path) -> None:
    """A key's directory, lock and header paths are built on its first swap: its later
    heartbeats and takeovers build none again."""
    async with CountingStores(f"file://{tmp_path}", fsync=False, push=False) as stores:
        root = stores.root
        assert isinstance(root, CountingRoot)
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        root.dirs = 0
        assert await sup.compare_and_swap(K, OWNER, 1, _row(1, "beat"))
        assert await sup.compare_and_swap(K, OWNER, 1, _row(1, "beat2"))
        assert await sup.compare_and_swap(K, OWNER, 1, _row(2))
        assert root.dirs == 0


async def test_kept_headers_and_paths_never_exceed_heads_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many keys one process touches, it keeps at most ``HEADS_KEPT`` parsed
    headers and key paths (memory stays bounded), and every key still reads right."""
    monkeypatch.setattr(supervision, "HEADS_KEPT", 2)
    keys = [ConversationKey("t", f"many{i}") for i in range(5)]
    async with FileStores(f"file://{tmp_path}", fsync=False, push=False) as stores:
        sup = stores.supervision
        assert isinstance(sup, supervision.FileSupervisionStore)
        for i, key in enumerate(keys):
            assert await sup.compare_and_swap(key, OWNER, None, _row(i + 1))
            assert len(sup._heads) <= 2 and len(sup._paths) <= 2, i
        for i, key in enumerate(keys):
            view = await sup.read(key, OWNER)
            assert view.row is not None and view.row.epoch == i + 1
            assert len(sup._heads) <= 2, i


async def test_a_header_that_does_not_parse_is_reported_naming_its_key_directory(
    tmp_path: Path,
) -> None:
    """A corrupt header is refused by a read and by a swap with an error that names the
    key's directory (where an operator finds the file); nothing is written."""
    async with FileStores(f"file://{tmp_path}", fsync=False, push=False) as stores:
        sup = stores.supervision
        assert await sup.compare_and_swap(K, OWNER, None, _row(1))
        kdir = stores.root.key_dir(K)
        head = stores.root.head_path(kdir)
        _write(head, b"{not json")
        what = f"header of {kdir} does not parse"
        with pytest.raises(BackendUnavailableError) as caught:
            await sup.read(K, OWNER)
        assert what in str(caught.value), str(caught.value)
        with pytest.raises(BackendUnavailableError) as caught:
            await sup.compare_and_swap(K, OWNER, 1, _row(2))
        assert what in str(caught.value), str(caught.value)
        assert _bytes(head) == b"{not json"
