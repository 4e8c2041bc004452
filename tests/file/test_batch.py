"""``compare_and_swap_many`` on files is one group commit: what each row gets back when
its own fsync, rename or directory sync fails, or its key is busy, while the other rows
of the batch go on."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentstores.errors import AgentStoresError, BackendUnavailableError, UnknownOutcomeError
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, Swap
from agentstores_file import fsio
from agentstores_file.fsio import FileIO, IOStats
from agentstores_file.stores import FileStores

OWNER = "owner"
KEYS = [ConversationKey("t", f"k{i}") for i in range(6)]


class FailingIO(FileIO):
    """Fails the fsync of one key's temp header, or the sync of one key's directory."""

    def __init__(self) -> None:
        super().__init__(fsync=True)
        self.fail_file: str | None = None
        self.fail_dir: str | None = None

    def sync(self, fd: int) -> None:
        if self.fail_file and os.readlink(f"/proc/self/fd/{fd}").startswith(self.fail_file):
            raise OSError(errno.EIO, "injected fsync failure")
        super().sync(fd)

    def sync_dir(self, path: str) -> None:
        if path == self.fail_dir:
            raise OSError(errno.EIO, "injected directory fsync failure")
        super().sync_dir(path)


def _names_its_row(error: AgentStoresError | None, key: ConversationKey) -> None:
    """A failed row's error says what failed and where (the batch call, the row's key)
    and keeps the OS error it stands for as its cause."""
    assert error is not None
    assert error.context.get("operation") == "supervision.compare_and_swap_many"
    assert error.key == key, "a row's error names another key"
    assert isinstance(error.__cause__, OSError), "a row's error lost the OS error behind it"


def _beat(epoch: int, new: int | None = None) -> list[Swap]:
    row = SupervisionRow("running", "turn", new or epoch)
    return [Swap(k, OWNER, epoch, row) for k in KEYS]


async def _claimed(url: str, io: FileIO | None = None) -> FileStores:
    stores = FileStores(url, io=io)
    await stores.__aenter__()
    for key in KEYS:
        assert await stores.supervision.compare_and_swap(
            key, OWNER, None, SupervisionRow("running", "turn", 1)
        )
    return stores


async def test_a_failed_fsync_fails_only_its_row_and_changes_nothing(tmp_path: Path) -> None:
    io = FailingIO()
    stores = await _claimed(f"file://{tmp_path}", io)
    try:
        sick = stores.root.key_dir(KEYS[2])
        io.fail_file = sick
        out = await stores.supervision.compare_and_swap_many(_beat(1, 2))
        assert [o.swapped for o in out] == [True, True, False, True, True, True]
        assert isinstance(out[2].error, BackendUnavailableError)
        assert not isinstance(out[2].error, UnknownOutcomeError)  # nothing was renamed
        _names_its_row(out[2].error, KEYS[2])
        assert all(o.error is None for i, o in enumerate(out) if i != 2)
        io.fail_file = None
        view = await stores.supervision.read(KEYS[2], OWNER)
        assert view.row is not None and view.row.epoch == 1  # the old row, untouched
        # The row is free for the next beat at its old epoch; the others moved on.
        again = await stores.supervision.compare_and_swap_many(
            [Swap(KEYS[2], OWNER, 1, SupervisionRow("running", "turn", 2))]
        )
        assert again[0].swapped
    finally:
        await stores.__aexit__(None, None, None)


async def test_a_batch_of_one_failing_row_fails_definitely(tmp_path: Path) -> None:
    """A batch of one row takes the single path; its failure before the rename is that
    row's definite error, naming the batch call and its key (never a success)."""
    io = FailingIO()
    stores = await _claimed(f"file://{tmp_path}", io)
    try:
        io.fail_file = stores.root.key_dir(KEYS[0])
        [out] = await stores.supervision.compare_and_swap_many(_beat(1, 2)[:1])
        assert out.swapped is False
        assert isinstance(out.error, BackendUnavailableError)
        assert not isinstance(out.error, UnknownOutcomeError)  # nothing was renamed
        _names_its_row(out.error, KEYS[0])
    finally:
        await stores.__aexit__(None, None, None)


async def test_a_failed_directory_sync_is_an_unknown_outcome(tmp_path: Path) -> None:
    io = FailingIO()
    stores = await _claimed(f"file://{tmp_path}", io)
    try:
        io.fail_dir = stores.root.key_dir(KEYS[4])
        out = await stores.supervision.compare_and_swap_many(_beat(1, 2))
        assert isinstance(out[4].error, UnknownOutcomeError)
        _names_its_row(out[4].error, KEYS[4])
        assert out[4].swapped is False
        assert [o.swapped for i, o in enumerate(out) if i != 4] == [True] * 5
    finally:
        await stores.__aexit__(None, None, None)


async def test_a_busy_key_waits_for_its_lock_without_holding_up_the_rest(
    tmp_path: Path,
) -> None:
    """A key another writer holds is tried, skipped, and swapped once the group is done:
    its row still gets the outcome a single call would."""
    stores = await _claimed(f"file://{tmp_path}")
    try:
        lock = os.open(stores.root.lock_path(stores.root.key_dir(KEYS[3])), os.O_RDWR)
        fcntl.flock(lock, fcntl.LOCK_EX)
        batch = asyncio.ensure_future(stores.supervision.compare_and_swap_many(_beat(1, 2)))
        # Every free key's row lands while the busy key is still held.
        for _ in range(500):
            views = [await stores.supervision.read(k, OWNER) for k in KEYS]
            if all(v.row is not None and v.row.epoch == 2 for i, v in enumerate(views) if i != 3):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the free keys waited for the busy one")
        assert not batch.done()
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
        out = await batch
        assert [o.swapped for o in out] == [True] * 6
        view = await stores.supervision.read(KEYS[3], OWNER)
        assert view.row is not None and view.row.epoch == 2
    finally:
        await stores.__aexit__(None, None, None)


async def test_rows_of_a_batch_keep_their_own_results(tmp_path: Path) -> None:
    """Winners, stale expectations, fenced epochs and another owner's key, in one group."""
    stores = await _claimed(f"file://{tmp_path}")
    try:
        other = ConversationKey("t", "theirs")
        assert await stores.supervision.compare_and_swap(
            other, "someone", None, SupervisionRow("running", "turn", 1)
        )
        assert await stores.supervision.compare_and_swap(
            KEYS[1], OWNER, 1, SupervisionRow("running", "turn", 5)
        )
        batch = [
            Swap(KEYS[0], OWNER, 1, SupervisionRow("running", "turn", 2)),  # wins
            Swap(KEYS[1], OWNER, 1, SupervisionRow("running", "turn", 2)),  # stale, fenced
            Swap(KEYS[2], OWNER, 9, SupervisionRow("running", "turn", 9)),  # wrong epoch
            Swap(other, OWNER, 1, SupervisionRow("running", "turn", 2)),  # not owned
            Swap(ConversationKey("t", "new"), OWNER, None, SupervisionRow("running", "t", 1)),
        ]
        out = await stores.supervision.compare_and_swap_many(batch)
        assert [o.swapped for o in out] == [True, False, False, False, True]
        assert [type(o.error).__name__ for o in out] == [
            "NoneType",
            "NoneType",
            "NoneType",
            "NotOwnedError",
            "NoneType",
        ]
        fence = (await stores.supervision.read(KEYS[1], OWNER)).fence
        assert fence == 5
    finally:
        await stores.__aexit__(None, None, None)


def _exists(path: str) -> bool:
    return os.path.exists(path)


class RenameRefusedIO(FileIO):
    """An error raised just before one path's rename (after its temp file is durable), or
    a temp file gone before its rename: either way that path is never renamed."""

    def __init__(self, path: str, *, vanish: bool = False) -> None:
        super().__init__(fsync=True)
        self.path = path
        self.vanish = vanish

    def step(self, what: str, path: str) -> None:
        if what == "replace" and path == self.path:
            if not self.vanish:
                raise OSError(errno.EIO, "injected failure before a rename")
            os.unlink(self.tmp_path(path))


def _mixed(takeovers: int, beats: int) -> list[Swap]:
    """``takeovers`` rows that replace their headers (epoch 1 to 2: ``KEYS[0]`` first),
    then ``beats`` heartbeats written in place (epoch 1 kept): one group commit whose
    renames and whose in-place fsyncs each run inline for one path, side by side for
    several."""
    assert takeovers + beats <= len(KEYS)
    moved = [Swap(k, OWNER, 1, SupervisionRow("running", "turn", 2)) for k in KEYS[:takeovers]]
    kept = KEYS[takeovers : takeovers + beats]
    return moved + [Swap(k, OWNER, 1, SupervisionRow("running", "beat", 1)) for k in kept]


@pytest.mark.parametrize("takeovers", [1, 3])
@pytest.mark.parametrize("vanish", [False, True])
async def test_a_row_never_renamed_fails_definitely_and_alone(
    takeovers: int, vanish: bool, tmp_path: Path
) -> None:
    """A takeover whose header is never renamed (an error before its rename, or its temp
    file gone) fails with a definite error, not an unknown outcome and never a success,
    whether its folder's renames run alone (inline) or beside others; the other rows
    land."""
    stores = await _claimed(f"file://{tmp_path}")
    await stores.__aexit__(None, None, None)
    sick = KEYS[takeovers - 1]  # the last folder: the ones before it succeed
    probe = FileStores(f"file://{tmp_path}")
    io = RenameRefusedIO(probe.root.head_path(probe.root.key_dir(sick)), vanish=vanish)
    stores = FileStores(f"file://{tmp_path}", io=io)
    await stores.__aenter__()
    try:
        out = await stores.supervision.compare_and_swap_many(_mixed(takeovers, 1))
        failed = out.pop(takeovers - 1)
        assert failed.swapped is False
        assert isinstance(failed.error, BackendUnavailableError)
        assert not isinstance(failed.error, UnknownOutcomeError), "nothing was renamed"
        _names_its_row(failed.error, sick)
        assert [(o.swapped, o.error) for o in out] == [(True, None)] * takeovers
        view = await stores.supervision.read(sick, OWNER)
        assert view.row is not None and view.row.epoch == 1
        for key in KEYS[: takeovers - 1]:
            view = await stores.supervision.read(key, OWNER)
            assert view.row is not None and view.row.epoch == 2
    finally:
        await stores.__aexit__(None, None, None)


@pytest.mark.parametrize("how", ["fsync", "vanish"])
async def test_a_claims_blank_heartbeat_file_failing_leaves_the_claim_whole(
    how: str, tmp_path: Path
) -> None:
    """A claim of a new key writes a blank heartbeat file and then the header, in one
    folder: when the heartbeat file fails (its fsync, or its temp file gone before the
    rename), the header is still renamed (the claim holds: its first heartbeat writes
    the file whole): the next file of the folder is not skipped."""
    fresh = [ConversationKey("t", f"fresh{i}") for i in range(2)]
    probe = FileStores(f"file://{tmp_path}")
    beat_file = os.path.join(probe.root.key_dir(fresh[0]), "beat")
    io: FileIO
    if how == "fsync":
        io = FailingIO()
        io.fail_file = probe.io.tmp_path(beat_file)
    else:
        io = RenameRefusedIO(beat_file, vanish=True)
    stores = FileStores(f"file://{tmp_path}", io=io)
    await stores.__aenter__()
    try:
        batch = [Swap(k, OWNER, None, SupervisionRow("running", "turn", 1)) for k in fresh]
        out = await stores.supervision.compare_and_swap_many(batch)
        assert [(o.swapped, o.error) for o in out] == [(True, None), (True, None)]
        assert not _exists(beat_file)
        if isinstance(io, FailingIO):
            io.fail_file = None
        else:
            io.path = ""
        for key in fresh:
            view = await stores.supervision.read(key, OWNER)
            assert view.row is not None and view.row.epoch == 1
            beat = SupervisionRow("running", "beat", 1)
            assert await stores.supervision.compare_and_swap(key, OWNER, 1, beat)
            view = await stores.supervision.read(key, OWNER)
            assert view.row is not None and view.row.message_id == "beat"
    finally:
        await stores.__aexit__(None, None, None)


@pytest.mark.parametrize("beats", [1, 2, 3])
async def test_a_heartbeat_whose_fsync_fails_is_an_unknown_outcome(
    beats: int, tmp_path: Path
) -> None:
    """Heartbeats are written in place and then made durable together: one whose fsync
    fails may or may not have landed (an unknown outcome, never a success), the others
    land; below :data:`~agentstores_file.fsio.SYNCFS_FROM` files each is fsynced on its
    own (inline for one, side by side for more)."""
    io = FailingIO()
    stores = await _claimed(f"file://{tmp_path}", io)
    try:
        batch = _mixed(1, beats)  # KEYS[0] moves on; KEYS[1] is the failing heartbeat
        io.fail_file = os.path.join(stores.root.key_dir(KEYS[1]), "beat")
        out = await stores.supervision.compare_and_swap_many(batch)
        assert out[1].swapped is False and isinstance(out[1].error, UnknownOutcomeError)
        _names_its_row(out[1].error, KEYS[1])
        others = [out[0], *out[2:]]
        assert [(o.swapped, o.error) for o in others] == [(True, None)] * beats
    finally:
        await stores.__aexit__(None, None, None)


async def test_a_failed_syncfs_leaves_every_heartbeat_it_covered_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From :data:`~agentstores_file.fsio.SYNCFS_FROM` heartbeats on, one ``syncfs`` makes
    them durable: when it fails, every one of them is an unknown outcome."""
    calls: list[int] = []

    def failing_syncfs(fd: int) -> int:
        calls.append(fd)
        return -1

    stores = await _claimed(f"file://{tmp_path}", FileIO(fsync=True))
    try:
        monkeypatch.setattr(fsio, "_syncfs", failing_syncfs)
        beats = [Swap(k, OWNER, 1, SupervisionRow("running", "beat", 1)) for k in KEYS]
        assert len(beats) >= fsio.SYNCFS_FROM
        out = await stores.supervision.compare_and_swap_many(beats)
        assert len(calls) == 1, "one syncfs for the one filesystem"
        assert all(o.swapped is False and isinstance(o.error, UnknownOutcomeError) for o in out)
        for key, outcome in zip(KEYS, out, strict=True):
            _names_its_row(outcome.error, key)
        monkeypatch.undo()
        out = await stores.supervision.compare_and_swap_many(beats)
        assert [(o.swapped, o.error) for o in out] == [(True, None)] * len(KEYS)
    finally:
        await stores.__aexit__(None, None, None)


POOL_SCRIPT = """
import asyncio, json, sys, threading
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, Swap
from agentstores_file.stores import FileStores

started = []
start = threading.Thread.start

def counted(thread):
    started.append(thread.name)
    start(thread)

threading.Thread.start = counted

async def main():
    keys = [ConversationKey("t", f"k{i}") for i in range(8)]
    async with FileStores(sys.argv[1]) as stores:
        for n in range(12):  # each a takeover of every key: 8 folders renamed side by side
            expected = None if n == 0 else n
            batch = [Swap(k, "o", expected, SupervisionRow("running", "t", n + 1)) for k in keys]
            out = await stores.supervision.compare_and_swap_many(batch)
            assert all(o.swapped and o.error is None for o in out), out
    print(json.dumps(started))

asyncio.run(main())
"""


async def _one_group_commit(url: str) -> None:
    stores = await _claimed(url)
    try:
        assert all(o.swapped for o in await stores.supervision.compare_and_swap_many(_beat(1, 2)))
    finally:
        await stores.__aexit__(None, None, None)


def test_group_commits_share_one_named_pool_per_process(tmp_path: Path) -> None:
    """A fresh process's group commits (each renaming in several folders side by side)
    all run on one pool of fsync threads, made on first use: its threads are named for
    the store (a thread dump says whose they are), and no more than
    :data:`~agentstores_file.fsio.SYNC_WORKERS` are ever started, however many commits
    ran. (One group commit runs here first, so that the pool's code is known to be this
    test's: the check itself runs in a fresh process.)"""
    asyncio.run(_one_group_commit(f"file://{tmp_path / 'here'}"))
    package = Path(fsio.__file__).resolve().parents[1]
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(package), path]))}
    done = subprocess.run(
        [sys.executable, "-c", POOL_SCRIPT, f"file://{tmp_path / 'fresh'}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = json.loads(done.stdout.strip().splitlines()[-1])
    pool = [name for name in names if name.startswith("agentstores-file-sync")]
    assert 1 <= len(pool) <= fsio.SYNC_WORKERS, names


async def test_a_group_commit_costs_one_sync_per_file_and_folder(tmp_path: Path) -> None:
    """What a group commit costs, counted: in-place heartbeats of six keys take one
    ``syncfs`` for all (where the OS has it) and rename nothing; takeovers of six keys
    take one rename and one fsync per header and one fsync per folder."""
    stats = IOStats()
    stores = await _claimed(f"file://{tmp_path}", FileIO(fsync=True, stats=stats))
    try:
        stats.reset()
        out = await stores.supervision.compare_and_swap_many(_mixed(0, len(KEYS)))
        assert all(o.swapped for o in out)
        beats = stats.snapshot()
        assert beats["replaces"] == 0 and beats["writes"] == len(KEYS)
        assert beats["syncs"] == (1 if fsio._syncfs is not None else len(KEYS))
        stats.reset()
        out = await stores.supervision.compare_and_swap_many(_mixed(len(KEYS), 0))
        assert all(o.swapped for o in out)
        takeovers = stats.snapshot()
        assert takeovers["replaces"] == len(KEYS)
        assert takeovers["syncs"] == 2 * len(KEYS)
    finally:
        await stores.__aexit__(None, None, None)
