"""``compare_and_swap_many`` on files is one group commit: what each row gets back when
its own fsync, rename or directory sync fails, or its key is busy, while the other rows
of the batch go on."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
from pathlib import Path

from agentstores.errors import BackendUnavailableError, UnknownOutcomeError
from agentstores.keys import ConversationKey
from agentstores.models import SupervisionRow, Swap
from agentstores_file.fsio import FileIO
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


async def test_a_failed_directory_sync_is_an_unknown_outcome(tmp_path: Path) -> None:
    io = FailingIO()
    stores = await _claimed(f"file://{tmp_path}", io)
    try:
        io.fail_dir = stores.root.key_dir(KEYS[4])
        out = await stores.supervision.compare_and_swap_many(_beat(1, 2))
        assert isinstance(out[4].error, UnknownOutcomeError)
        assert not out[4].swapped
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
