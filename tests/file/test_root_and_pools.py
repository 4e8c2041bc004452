"""The file bundle's root and threads: the store clock by default is the system clock in
microseconds; a corrupt header found by a listing names its key directory; the
process-wide pool runs :data:`DEFAULT_WORKERS` blocking calls at once, is taken without
a lock once made, and its threads (and the change watcher's) are named for the backend;
the change watcher never keeps a process alive and, once closed, reads as not pushing;
closing a bundle with a pool of its own waits for the calls running on it; a bundle
without ``workers`` makes no pool, one with ``workers`` runs that many calls at once on
its own (started on first use); bundles opening a new root at once all open; a key lock
the kernel refuses is a typed error and leaks no descriptor."""

from __future__ import annotations

import asyncio
import os
import threading
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentstores.errors import BackendUnavailableError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_file import _base, header
from agentstores_file.fsio import FileIO
from agentstores_file.stores import FileStores

P = "p"
WAIT = 10.0
"""Longest a test waits for a step it expects."""


def _msgs(n: int) -> list[Message]:
    return [Message(f"m{i}", ("user", "assistant")[i % 2], {"i": i}) for i in range(n)]


async def test_the_default_store_clock_is_the_system_clock_in_microseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``clock`` the store's time is the system clock, to the microsecond."""
    ns = 1_900_000_000_123_456_789
    monkeypatch.setattr(header, "time", types.SimpleNamespace(time_ns=lambda: ns))
    stores = FileStores(f"file://{tmp_path}", push=False)
    assert await stores.now() == datetime(2030, 3, 17, 17, 46, 40, 123456, tzinfo=UTC)


async def test_a_corrupt_header_found_by_a_listing_names_its_key_directory(
    tmp_path: Path,
) -> None:
    """A listing that meets a header that does not parse reports it naming the key's
    directory (where an operator finds the file)."""
    async with FileStores(f"file://{tmp_path}", fsync=False, push=False) as stores:
        key = ConversationKey("t", "s")
        await stores.conversations.append_messages(key, P, _msgs(1))
        kdir = stores.root.key_dir(key)
        await asyncio.to_thread(Path(stores.root.head_path(kdir)).write_bytes, b"{not json")
        with pytest.raises(BackendUnavailableError) as caught:
            await stores.conversations.list_conversations("t", P)
        assert f"header of {kdir} does not parse" in str(caught.value), str(caught.value)


class _CountingLock:
    """A lock that counts how often it is taken."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.taken = 0

    def __enter__(self) -> bool:
        self.taken += 1
        return self.lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.lock.__exit__(*exc)


def test_the_shared_pool_is_taken_without_a_lock_once_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every store call asks for the process-wide pool: once it is made, no lock."""
    pool = _base.shared_pool()
    lock = _CountingLock()
    monkeypatch.setattr(_base, "_shared_lock", lock)
    for _ in range(3):
        assert _base.shared_pool() is pool
    assert lock.taken == 0


def _with_fresh_shared_pool(check: types.FunctionType) -> None:
    before = _base._shared
    _base._forget_shared()
    try:
        check(_base.shared_pool())
    finally:
        pool = _base._shared
        _base._shared = before
        if pool is not None and pool is not before:
            pool.shutdown()


def test_the_shared_pool_runs_default_workers_blocking_calls_at_once() -> None:
    """Bundles without ``workers`` share a pool of :data:`DEFAULT_WORKERS` threads: that
    many blocking calls (flock waits) run at once, none waits for another to end."""

    def check(pool: object) -> None:
        barrier = threading.Barrier(_base.DEFAULT_WORKERS, timeout=WAIT)
        futures = [pool.submit(barrier.wait) for _ in range(_base.DEFAULT_WORKERS)]  # type: ignore[attr-defined]
        assert sorted(f.result(2 * WAIT) for f in futures) == list(range(_base.DEFAULT_WORKERS))

    _with_fresh_shared_pool(check)  # type: ignore[arg-type]


class _ThreadNames(FileIO):
    """Records the name of the thread each file read runs on."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.names: set[str] = set()

    def read_file(self, path: str) -> bytes | None:
        self.names.add(threading.current_thread().name)
        return super().read_file(path)


def test_store_calls_run_on_threads_named_for_the_backend(tmp_path: Path) -> None:
    """The shared pool's threads are named ``agentstores-file_N`` (told apart from the
    application's in a thread dump)."""

    async def calls() -> set[str]:
        io = _ThreadNames()
        async with FileStores(f"file://{tmp_path}", io=io, push=False) as stores:
            await stores.conversations.append_messages(ConversationKey("t", "s"), P, _msgs(1))
        return io.names

    def check(_pool: object) -> None:
        names = asyncio.run(calls())
        assert names and all(n.startswith("agentstores-file_") for n in names), names

    _with_fresh_shared_pool(check)  # type: ignore[arg-type]


async def test_the_change_watcher_is_a_daemon_thread_named_for_the_backend(
    tmp_path: Path,
) -> None:
    """The change watcher's thread is named ``agentstores-file-changes`` and is a daemon:
    a bundle left open never keeps its process from exiting."""
    before = set(threading.enumerate())
    async with FileStores(f"file://{tmp_path}", fsync=False) as stores:
        assert stores.watcher is not None
        started = [t for t in threading.enumerate() if t not in before]
        watchers = [t for t in started if t.name == "agentstores-file-changes"]
        assert len(watchers) == 1, [t.name for t in started]
        assert watchers[0].daemon


async def test_a_closed_bundle_reads_as_not_pushing(tmp_path: Path) -> None:
    """``wakeups.remote`` is True while the change watcher runs and exactly False once the
    bundle is closed (followers poll again)."""
    stores = FileStores(f"file://{tmp_path}", fsync=False)
    async with stores:
        assert stores.wakeups.remote is True
    assert stores.wakeups.remote is False


class _Held(FileIO):
    """Holds the first read of a header until the test lets it go."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.armed = False
        self.reached = threading.Event()
        self.go = threading.Event()
        self.finished = threading.Event()

    def read_file(self, path: str) -> bytes | None:
        if self.armed and path.endswith("/head"):
            self.armed = False
            self.reached.set()
            self.go.wait(WAIT)
            raw = super().read_file(path)
            self.finished.set()
            return raw
        return super().read_file(path)


async def test_closing_waits_for_the_calls_running_on_the_bundles_own_pool(
    tmp_path: Path,
) -> None:
    """A bundle with ``workers`` has a pool of its own: closing it returns only after the
    calls running on it ended (nothing of the bundle runs on after close)."""
    io = _Held()
    stores = FileStores(f"file://{tmp_path}", io=io, workers=2, push=False)
    await stores.__aenter__()
    key = ConversationKey("t", "s")
    io.armed = True
    call = asyncio.ensure_future(stores.conversations.get_conversation(key, P))
    assert await asyncio.to_thread(io.reached.wait, WAIT)
    call.cancel()  # the caller gives up; the call itself runs on in its thread
    closing = asyncio.ensure_future(stores.__aexit__(None, None, None))
    done, _ = await asyncio.wait({closing}, timeout=1.0)
    assert not done, "close returned while a call of the bundle still ran"
    io.go.set()
    await closing
    assert io.finished.is_set()


class _Threads(FileIO):
    """Records the thread each header read runs on, and (once ``hold`` is set) keeps the
    reads in until the test lets them go, counting how many are in at once."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.threads: set[threading.Thread] = set()
        self.hold = False
        self.inside = 0
        self.most = 0
        self.count = threading.Lock()
        self.go = threading.Event()

    def read_file(self, path: str) -> bytes | None:
        self.threads.add(threading.current_thread())
        if self.hold and path.endswith("/head"):
            with self.count:
                self.inside += 1
                self.most = max(self.most, self.inside)
            self.go.wait(WAIT)
            with self.count:
                self.inside -= 1
        return super().read_file(path)


async def test_a_bundle_without_workers_runs_on_the_shared_pool(tmp_path: Path) -> None:
    """No ``workers``: the bundle makes no pool of its own, its calls run on the
    process-wide pool's threads."""
    io = _Threads()
    async with FileStores(f"file://{tmp_path}", io=io, push=False) as stores:
        await stores.conversations.append_messages(ConversationKey("t", "s"), P, _msgs(2))
        await stores.conversations.get_conversation(ConversationKey("t", "s"), P)
    shared = set(_base.shared_pool()._threads)  # the executor's own threads
    assert io.threads and io.threads <= shared, (io.threads, shared)


async def test_a_bundle_with_workers_runs_that_many_calls_at_once_on_its_own_threads(
    tmp_path: Path,
) -> None:
    """``workers=2``: the bundle's calls run on a pool of its own, of two threads named
    ``agentstores-file_N``: with three calls waiting on storage, two are in and the
    third waits its turn; all three end once storage answers."""
    io = _Threads()
    async with FileStores(f"file://{tmp_path}", io=io, workers=2, push=False) as stores:
        keys = [ConversationKey("t", f"s{i}") for i in range(3)]
        for key in keys:
            await stores.conversations.append_messages(key, P, _msgs(1))
        io.hold = True
        calls = [asyncio.ensure_future(stores.conversations.get_conversation(k, P)) for k in keys]
        for _ in range(100):
            if io.inside == 2:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # time for a third thread, were there one, to enter
        assert (io.inside, io.most) == (2, 2)
        io.go.set()
        assert all(c is not None for c in await asyncio.gather(*calls))
    shared = set(_base.shared_pool()._threads)
    names = {t.name for t in io.threads}
    assert len(io.threads) == 2 and not io.threads & shared, names
    assert all(n.startswith("agentstores-file_") for n in names), names


async def test_a_bundle_with_workers_starts_its_pool_on_first_use(tmp_path: Path) -> None:
    """A bundle with ``workers`` called before it is opened (or after it was closed)
    starts its own pool on that call rather than failing; closing stops it."""
    io = _Threads()
    stores = FileStores(f"file://{tmp_path}", io=io, workers=2, push=False)
    key = ConversationKey("t", "s")
    try:
        stored = await stores.conversations.append_messages(key, P, _msgs(1))
        assert [m.id for m in stored] == ["m0"]
        assert [m.id for m in await stores.conversations.read_messages(key, P)] == ["m0"]
    finally:
        await stores.close()
    assert io.threads and not io.threads & set(_base.shared_pool()._threads)


class _HeldAtMarker(FileIO):
    """Holds the first replace of the root's format marker until the test lets it go."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.reached = threading.Event()
        self.go = threading.Event()

    def step(self, what: str, path: str) -> None:
        if what == "replace" and path.endswith("FORMAT") and not self.reached.is_set():
            self.reached.set()
            self.go.wait(WAIT)


async def test_bundles_opening_a_new_root_at_once_all_open(tmp_path: Path) -> None:
    """Two bundles (two replicas) opening the same new root at once both open: the
    second waits while the first writes the format marker (its temp file has a fixed
    name, so two writers at once would take it from each other)."""
    url = f"file://{tmp_path / 'root'}"
    first_io = _HeldAtMarker()
    first = FileStores(url, io=first_io, push=False)
    second = FileStores(url, push=False)
    opening = asyncio.ensure_future(first.__aenter__())
    assert await asyncio.to_thread(first_io.reached.wait, WAIT)
    joining = asyncio.ensure_future(second.__aenter__())
    await asyncio.sleep(0.3)  # time for the second to write the marker, were it let in
    first_io.go.set()
    await asyncio.gather(opening, joining)
    await first.close()
    await second.close()
    assert (tmp_path / "root" / "FORMAT").read_bytes() == header.FORMAT


class _LockFails(FileIO):
    """Its key locks fail with an OS error (a lock the kernel refuses)."""

    def lock(self, fd: int, *, exclusive: bool) -> None:
        raise OSError(37, "No locks available")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_key_lock_the_kernel_refuses_is_a_typed_error_and_leaks_no_file(
    tmp_path: Path,
) -> None:
    """When taking a key's lock fails, the call raises the backend's typed error (never
    a stray exception of its own) and the lock file's descriptor is closed."""
    async with FileStores(f"file://{tmp_path}", fsync=False, push=False) as stores:
        key = ConversationKey("t", "s")
        await stores.conversations.append_messages(key, P, _msgs(1))
    io = _LockFails(fsync=False)
    stores = FileStores(f"file://{tmp_path}", io=io, push=False)
    stores.root.setup = lambda: None  # type: ignore[method-assign]  # setup locks too
    async with stores:
        before = _open_fds()
        for _ in range(3):
            with pytest.raises(BackendUnavailableError):
                await stores.conversations.append_messages(key, P, _msgs(2))
        assert _open_fds() == before
    async with FileStores(f"file://{tmp_path}", fsync=False, push=False) as stores:
        assert [m.id for m in await stores.conversations.read_messages(key, P)] == ["m0"]
