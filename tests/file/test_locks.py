"""Every write holds its key's lock exclusively from the header it reads to the files it
replaces: a second write of the same key waits, so it never decides on a header the first
is about to replace (two deletes at different epochs would otherwise leave the lower fence).
And a write that finds nothing to do leaves nothing on disk."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentstores.errors import FencedError, NotFoundError
from agentstores.keys import ConversationKey
from agentstores.models import PendingAuthorization, RecordedEvent, UserIntegration
from agentstores_file.fsio import FileIO
from agentstores_file.stores import FileStores

P = "p"
PAUSE = 0.5
"""How long the first write waits at its first mutating step for the second to finish
(the second can finish meanwhile only if the first's lock let it in)."""


class _PauseFirstStep(FileIO):
    """Holds the first mutating step after :meth:`arm` (a write that has read the header
    and decided), or the first of the kind ``arm`` names, until :attr:`go` is set or
    :data:`PAUSE` passed."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.armed: str | None = None
        self.reached = threading.Event()
        self.go = threading.Event()
        self._guard = threading.Lock()

    def arm(self, what: str = "") -> None:
        """Pause at the next step (of kind ``what``, when given)."""
        self.armed = what

    def step(self, what: str, path: str) -> None:
        with self._guard:
            pause = self.armed is not None and self.armed in ("", what)
            if pause:
                self.armed = None
        if pause:
            self.reached.set()
            self.go.wait(PAUSE)


WRITES: dict[str, Callable[[FileStores, ConversationKey, int], Awaitable[object]]] = {
    "state.save": lambda s, k, e: s.state.save(k, P, {"e": e}, epoch=e),
    "state.delete": lambda s, k, e: s.state.delete(k, P, epoch=e),
    "recording.put": lambda s, k, e: s.recording.put(k, P, RecordedEvent(e, "x", "m", e)),
    "recording.delete": lambda s, k, e: s.recording.delete(k, P, "m", epoch=e),
    "pause_tokens.put": lambda s, k, e: s.pause_tokens.put(
        f"t{e}", k, P, e, s.root.now() + timedelta(hours=1), epoch=e
    ),
}
"""Writes that raise the key's fence to their epoch, each taking the key's lock."""


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_two_writes_at_different_epochs_keep_the_higher_fence(
    write: str, tmp_path: Path
) -> None:
    """The write at the lower epoch read the header and paused; the one at the higher
    epoch waits for it (else it decides on the same header, and the paused write, going
    on, puts the lower fence back)."""
    io = _PauseFirstStep()
    do = WRITES[write]
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        key = ConversationKey("t", "s")
        await stores.state.save(key, P, {"a": 1}, epoch=1)
        await stores.recording.put(key, P, RecordedEvent(0, "x", "m", 1))
        io.arm("create")  # the new body's file: after the header was read and judged
        lower = asyncio.ensure_future(do(stores, key, 5))
        await asyncio.to_thread(io.reached.wait, 30)
        await do(stores, key, 7)  # waits for the first, unless let in
        io.go.set()
        with contextlib.suppress(FencedError):  # it may have come second after all
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
        with pytest.raises(NotFoundError):
            await stores.pause_tokens.claim("t", key, P)
        with pytest.raises(NotFoundError):
            await stores.pause_tokens.abandon("t", key, P)
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
