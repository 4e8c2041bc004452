"""Every write holds its key's lock exclusively from the header it reads to the files it
replaces: a second write of the same key waits, so it never decides on a header the first
is about to replace (two deletes at different epochs would otherwise leave the lower fence).
And a write that finds nothing to do leaves nothing on disk."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path

from agentstores.keys import ConversationKey
from agentstores.models import PendingAuthorization, UserIntegration
from agentstores_file.fsio import FileIO
from agentstores_file.stores import FileStores

P = "p"
PAUSE = 1.0
"""How long the first write waits at its first mutating step for the second to finish
(the second can finish meanwhile only if the first's lock let it in)."""


class _PauseFirstStep(FileIO):
    """Holds the first mutating step after :meth:`arm` (a write that has read the header
    and decided) until :attr:`go` is set or :data:`PAUSE` passed."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.armed = False
        self.reached = threading.Event()
        self.go = threading.Event()
        self._guard = threading.Lock()

    def arm(self) -> None:
        self.armed = True

    def step(self, what: str, path: str) -> None:
        with self._guard:
            pause, self.armed = self.armed, False
        if pause:
            self.reached.set()
            self.go.wait(PAUSE)


async def test_two_state_deletes_at_different_epochs_keep_the_higher_fence(
    tmp_path: Path,
) -> None:
    io = _PauseFirstStep()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        key = ConversationKey("t", "s")
        await stores.state.save(key, P, {"a": 1}, epoch=1)
        io.arm()
        lower = asyncio.ensure_future(stores.state.delete(key, P, epoch=5))
        await asyncio.to_thread(io.reached.wait, 30)
        await stores.state.delete(key, P, epoch=7)  # waits for the first, unless let in
        io.go.set()
        await lower
        assert (await stores.supervision.read(key, P)).fence == 7, "the lower fence won"


async def test_a_delete_of_nothing_leaves_nothing_on_disk(tmp_path: Path) -> None:
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        root = Path(stores.root.keys_root)
        before = await asyncio.to_thread(_entries, root)
        key = ConversationKey("t", "never-written")
        await stores.state.delete(key, P)
        assert not await stores.recording.delete(key, P, "m")
        assert not await stores.supervision.delete(key, P, "m", 1)
        assert await asyncio.to_thread(_entries, root) == before, "a no-op delete made files"


def _entries(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


async def test_two_deletes_of_one_integration_remove_it_once(tmp_path: Path) -> None:
    """The second waits for the first (the user's folder lock is exclusive), finds nothing
    and says so: exactly one delete reports that it removed the record."""
    io = _PauseFirstStep()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        await stores.oauth.save_user_integration(UserIntegration("t", "u", "srv", tokens={"a": 1}))
        io.arm()
        first = asyncio.ensure_future(stores.oauth.delete_user_integration("t", "u", "srv"))
        await asyncio.to_thread(io.reached.wait, 30)
        second = await stores.oauth.delete_user_integration("t", "u", "srv")
        io.go.set()
        assert sorted([await first, second]) == [False, True]


async def test_two_saves_of_one_integration_leave_one_index_entry(tmp_path: Path) -> None:
    """The second save waits for the first, then moves the pending-state index entry
    from the first's state to its own: one entry is left, for the record that stays."""
    io = _PauseFirstStep()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        oauth = stores.oauth
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", tokens={"a": 1}))
        io.arm()  # the first step past the lock: the new state's index folder
        first = asyncio.ensure_future(
            oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("y")))
        )
        await asyncio.to_thread(io.reached.wait, 30)
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("z")))
        io.go.set()
        await first
        record = await oauth.get_user_integration("t", "u", "srv")
        assert record is not None and record.pending is not None
        pending = Path(stores.root.oauth_root) / "pending"
        entries = await asyncio.to_thread(lambda: [p for p in pending.rglob("*") if p.is_file()])
        assert len(entries) == 1, f"{len(entries)} index entries for one record"
        assert await oauth.find_by_pending_state(record.pending.state) is not None


def _pending(state: str) -> PendingAuthorization:
    return PendingAuthorization(
        state, "https://a", "v", "https://t", "https://r", datetime(2031, 1, 1, tzinfo=UTC)
    )
