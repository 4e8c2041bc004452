"""OAuth records on files, record by record: a corrupt record file is named when refused,
a save never overwrites another server's record, the pending-state index survives what a
failed save or a foreign file leaves in it, a lookup by state answers with the record it
matched, and saves of one tenant's client info take turns."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import fcntl
import os
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentstores.errors import BackendUnavailableError, ConflictError
from agentstores.models import ClientInfo, PendingAuthorization, UserIntegration
from agentstores_file.fsio import FileIO
from agentstores_file.header import name_digest
from agentstores_file.oauth import _record_name
from agentstores_file.stores import FileStores


def _pending(state: str) -> PendingAuthorization:
    return PendingAuthorization(
        state, "https://a", "v", "https://t", "https://r", datetime(2031, 1, 1, tzinfo=UTC)
    )


def _user_record(stores: FileStores, tenant: str, user: str, server: str) -> Path:
    return Path(stores.oauth._user_dir(tenant, user)[1], _record_name(server))


def _index_entries(stores: FileStores) -> list[Path]:
    """The pending-state index entries, in the order a lookup reads them."""
    pending = Path(stores.root.oauth_root) / "pending"
    return sorted(p for p in pending.rglob("*") if p.is_file())


def _corrupt(*paths: Path) -> None:
    for path in paths:
        path.write_bytes(b"{not json")


async def test_a_corrupt_record_is_refused_naming_its_file(tmp_path: Path) -> None:
    """A record file that does not parse is refused as corrupt by every read that meets
    it (get, find by pending state, client info), and the error names the file: what an
    operator has to repair."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        oauth = stores.oauth
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("x")))
        await oauth.save_client_info(ClientInfo("t", "srv", {"id": "c"}))
        user_record = _user_record(stores, "t", "u", "srv")
        client_record = Path(oauth._client_dir("t"), _record_name("srv"))
        _corrupt(user_record, client_record)

        reads: list[tuple[Callable[[], Awaitable[object]], Path]] = [
            (lambda: oauth.get_user_integration("t", "u", "srv"), user_record),
            (lambda: oauth.find_by_pending_state("x"), user_record),
            (lambda: oauth.get_client_info("t", "srv"), client_record),
        ]
        for read, path in reads:
            with pytest.raises(BackendUnavailableError, match="corrupt") as refused:
                await read()
            assert str(path) in str(refused.value), f"the error does not name {path}"


async def test_a_save_refuses_to_overwrite_another_servers_record(tmp_path: Path) -> None:
    """A record of another server found at the path a save writes (a name digest
    collision, or a tampered store) is refused (ConflictError) and left as it was, never
    overwritten as this server's."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        oauth = stores.oauth
        await oauth.save_user_integration(UserIntegration("t", "u", "one", tokens={"t": "1"}))
        target = _user_record(stores, "t", "u", "two")
        _user_record(stores, "t", "u", "one").rename(target)
        before = target.read_bytes()
        with pytest.raises(ConflictError):
            await oauth.save_user_integration(UserIntegration("t", "u", "two", _pending("x")))
        assert target.read_bytes() == before, "another server's record was overwritten"


class _FailingReplace(FileIO):
    """Fails the replace of one file (before anything is renamed)."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.fail: str | None = None

    def replace_file(self, path: str, data: bytes | bytearray, *, sync_dir: bool = True) -> None:
        if path == self.fail:
            raise OSError(errno.EIO, "injected replace failure")
        super().replace_file(path, data, sync_dir=sync_dir)


async def test_a_failed_save_does_not_hide_an_integration_pending_on_the_same_state(
    tmp_path: Path,
) -> None:
    """A save that failed after writing its pending-state index entry leaves an entry
    with no record behind; a lookup of that state skips it and still finds another
    integration pending on the same state (the contract allows two)."""
    io = _FailingReplace()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        oauth = stores.oauth
        # The failed save's entry must come first in the folder's order.
        failed, kept = sorted(["a", "b", "c"], key=lambda user: name_digest("t", user))[:2]
        io.fail = str(_user_record(stores, "t", failed, "srv"))
        with pytest.raises(BackendUnavailableError):
            await oauth.save_user_integration(UserIntegration("t", failed, "srv", _pending("x")))
        io.fail = None
        await oauth.save_user_integration(UserIntegration("t", kept, "srv", _pending("x")))
        entries = _index_entries(stores)
        assert len(entries) == 2
        assert entries[0].name.startswith(name_digest("t", failed))

        found = await oauth.find_by_pending_state("x")
        assert found is not None, "the failed save's index entry hid the kept integration"
        assert found.user == kept


async def test_a_foreign_file_in_the_index_is_skipped(tmp_path: Path) -> None:
    """A file in a pending-state index folder that is no index entry (a file manager's
    ``.DS_Store``, say, which sorts before every entry) is skipped: the lookup goes on to
    the entries after it."""
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        oauth = stores.oauth
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("x")))
        [entry] = _index_entries(stores)
        (entry.parent / ".DS_Store").write_bytes(b"")
        found = await oauth.find_by_pending_state("x")
        assert found is not None and found.user == "u"


class _TakingTurns(FileIO):
    """Pauses one write at the rename of one file, and reports a lock that has to wait
    for another holder (a real flock, tried without waiting first)."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.pause_at: str | None = None
        self.while_paused = lambda: None
        self.moved = threading.Event()
        """Set when a lock had to wait (or by the test when the other write ended)."""

    def lock(self, fd: int, *, exclusive: bool) -> None:
        kind = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
        except BlockingIOError:
            self.moved.set()
            super().lock(fd, exclusive=exclusive)

    def step(self, what: str, path: str) -> None:
        if what == "replace" and path == self.pause_at:
            self.pause_at = None
            self.while_paused()


async def test_saves_of_one_tenants_client_info_take_turns(tmp_path: Path) -> None:
    """A save of a tenant's client info holds the tenant's folder to itself: a second
    save, started while the first is about to rename its written temp file, waits for
    the first to end. Both succeed and the later one wins (let in, the second would take
    the first's temp file away and fail it)."""
    io = _TakingTurns()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        oauth = stores.oauth
        loop = asyncio.get_running_loop()
        await oauth.save_client_info(ClientInfo("t", "srv", {"id": "old"}))
        second_save = ClientInfo("t", "srv", {"id": "second"})
        started: list[concurrent.futures.Future[None]] = []

        def start_the_second() -> None:  # on the first save's thread, its lock held
            io.moved.clear()
            future = asyncio.run_coroutine_threadsafe(oauth.save_client_info(second_save), loop)
            future.add_done_callback(lambda _: io.moved.set())
            started.append(future)
            assert io.moved.wait(30), "the second save neither waited nor ended"

        io.while_paused = start_the_second
        io.pause_at = os.path.join(oauth._client_dir("t"), _record_name("srv"))
        await oauth.save_client_info(ClientInfo("t", "srv", {"id": "first"}))
        [second] = started
        await asyncio.wrap_future(second)
        assert await oauth.get_client_info("t", "srv") == second_save


class _SaveAfterRead(FileIO):
    """Runs ``then`` right after the first read of ``path`` has returned its bytes."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.path: str | None = None
        self.then: Callable[[], None] | None = None

    def read_file(self, path: str) -> bytes | None:
        raw = super().read_file(path)
        if path == self.path and self.then is not None:
            then, self.then = self.then, None
            then()
        return raw


async def test_a_lookup_by_state_answers_with_the_record_it_matched(tmp_path: Path) -> None:
    """A save landing while ``find_by_pending_state`` reads: the answer is the record as
    it was read (pending on the state asked for), never the newer one that is no longer
    pending on it (which is neither before nor after the save)."""
    io = _SaveAfterRead()
    async with FileStores(f"file://{tmp_path}", io=io) as stores:
        oauth = stores.oauth
        await oauth.save_user_integration(UserIntegration("t", "u", "srv", _pending("x")))
        loop = asyncio.get_running_loop()
        settled = UserIntegration("t", "u", "srv", tokens={"access_token": "a"})

        def save_meanwhile() -> None:
            asyncio.run_coroutine_threadsafe(oauth.save_user_integration(settled), loop).result(30)

        io.path = str(_user_record(stores, "t", "u", "srv"))
        io.then = save_meanwhile
        found = await oauth.find_by_pending_state("x")
        assert io.then is None, "the lookup never read the record"
        assert found is not None and found.pending is not None
        assert found.pending.state == "x", "the lookup answered with a record not pending on x"
        assert await oauth.find_by_pending_state("x") is None, "the save since settled it"
