"""Every read, write, sync, rename and lock of the file backend goes through one ``FileIO``.

One place for the durability protocol (write a temp file, fsync it, ``os.replace``,
fsync the directory) and one place to observe it: :class:`IOStats` counts reads and
bytes so tests can check that a read at 100,000 messages costs what it costs at 10,
and a subclass can override :meth:`FileIO.step` to stop the process at any step.

A store holds transcripts, agent state and OAuth tokens, so only its owner may read it:
every file is created ``0600`` and every folder ``0700`` whatever the process umask
(:func:`open_private`, :meth:`FileIO.ensure_dir`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TypeVar

_sync_data = getattr(os, "fdatasync", os.fsync)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_READ_SIZE = 1 << 16

SYNCFS_FROM = 4
"""Fewest files one :meth:`FileIO.sync_all` makes durable with ``syncfs(2)`` rather than
an fdatasync each: one call flushes the whole filesystem once, where each fdatasync is a
thread hand-off (a GIL round trip) and a device flush (pwrite then sync of 2,000 files
in batches of 128, on this project's VM disk: 55,000 a second and 11 us of CPU each with
syncfs, 10,000-17,000 and 70-120 us on 32 threads). Below it, fdatasync is cheaper: it
flushes no one else's dirty pages."""


FILE_MODE = 0o600
"""Every file of a store: read and written by its owner only."""
DIR_MODE = 0o700
"""Every folder of a store: listed and entered by its owner only."""


def open_private(path: str, flags: int) -> int:
    """``os.open(path, flags | O_CREAT)`` leaving the file :data:`FILE_MODE`.

    Creating with that mode is never looser than it, but a umask that takes the owner's
    bits away would make it tighter, and a file already there (a temp file left by a
    crash, a store written by an older version) keeps its mode: so it is set when it
    differs. A file owned by someone else keeps its mode (only its owner may change it).
    """
    fd = os.open(path, flags | os.O_CREAT | _O_CLOEXEC, FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o7777 != FILE_MODE:
            with contextlib.suppress(PermissionError):
                os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs(2)``, where it reports the writeback errors it meets (Linux 5.8
    and later; before, it returned 0 after a failed writeback, which would report a lost
    write as durable); else None (then every file is fdatasynced)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
        if (major, minor) < (5, 8):
            return None
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError, ValueError):
        return None
    syncfs.argtypes = [ctypes.c_int]
    syncfs.restype = ctypes.c_int
    return syncfs


_syncfs = _load_syncfs()

SYNC_WORKERS = 32
"""Threads that fsync the files of one group commit together: concurrent fsyncs share the
filesystem journal's commits (ext4, xfs), where one thread would wait for each in turn,
and in-place heartbeats' fdatasyncs overlap at the device (pwrite + fdatasync of 2,000
files: 8,000-10,000 a second on 16 threads, 14,000-16,000 on 32, on this project's VM
disk)."""

_sync_pool: tuple[int, ThreadPoolExecutor] | None = None
_sync_pool_lock = threading.Lock()

A = TypeVar("A")


def _sync_workers() -> ThreadPoolExecutor:
    """The process-wide pool of leaf fsync tasks (made anew after a fork). Its tasks
    never wait on anything else, so callers on any pool may wait for them."""
    global _sync_pool
    with _sync_pool_lock:
        if _sync_pool is None or _sync_pool[0] != os.getpid():
            pool = ThreadPoolExecutor(SYNC_WORKERS, thread_name_prefix="agentstores-file-sync")
            _sync_pool = (os.getpid(), pool)
        return _sync_pool[1]


def each(fn: Callable[[A], object], args: Sequence[A]) -> list[Exception | None]:
    """Run ``fn`` on every arg at once (inline for one) and wait for all; the error each
    raised, or None. A BaseException (a crash a test planted) is re-raised after all end."""
    if len(args) <= 1:
        errors: list[Exception | None] = []
        for arg in args:
            try:
                fn(arg)
                errors.append(None)
            except Exception as failed:
                errors.append(failed)
        return errors
    pool = _sync_workers()
    futures = [pool.submit(fn, arg) for arg in args]
    wait(futures)
    out: list[Exception | None] = []
    for future in futures:
        error = future.exception()
        if error is not None and not isinstance(error, Exception):
            raise error
        out.append(error)
    return out


@dataclass
class IOStats:
    """Counters of file operations; shared by every thread of one ``FileIO``."""

    reads: int = 0
    read_bytes: int = 0
    writes: int = 0
    write_bytes: int = 0
    syncs: int = 0
    replaces: int = 0

    def reset(self) -> None:
        self.reads = self.read_bytes = self.writes = self.write_bytes = 0
        self.syncs = self.replaces = 0

    def snapshot(self) -> dict[str, int]:
        return {
            "reads": self.reads,
            "read_bytes": self.read_bytes,
            "writes": self.writes,
            "write_bytes": self.write_bytes,
            "syncs": self.syncs,
            "replaces": self.replaces,
        }


class FileIO:
    """File primitives with the backend's durability rules.

    ``fsync=False`` skips every fsync: a killed process still leaves every record old or
    new (the kernel keeps the page cache), but a power loss may lose acknowledged
    writes. Writers call these only while holding the lock that guards the target, so
    a temp file name fixed per target is unique among live writers.
    """

    def __init__(self, *, fsync: bool = True, stats: IOStats | None = None) -> None:
        self.fsync = fsync
        self.stats = stats
        self._stats_lock = threading.Lock()
        self._local = threading.local()

    # --- hooks -------------------------------------------------------------------

    def step(self, what: str, path: str) -> None:
        """Called before each mutating step; a no-op (tests override it to crash)."""

    @property
    def commits(self) -> int:
        """How many renames/unlinks this thread has done: after one, an error leaves the
        outcome of the whole call unknown."""
        return getattr(self._local, "commits", 0)

    def _committing(self) -> None:
        self._local.commits = self.commits + 1

    def _count(self, field: str, amount: int, field_bytes: str | None = None, n: int = 0) -> None:
        stats = self.stats
        if stats is None:
            return
        with self._stats_lock:
            setattr(stats, field, getattr(stats, field) + amount)
            if field_bytes is not None:
                setattr(stats, field_bytes, getattr(stats, field_bytes) + n)

    # --- reads -------------------------------------------------------------------

    def read_file(self, path: str) -> bytes | None:
        """The whole file, or None when it does not exist."""
        try:
            fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            data = os.read(fd, _READ_SIZE)
            if len(data) == _READ_SIZE:  # a short read of a regular file is its end
                chunks = [data]
                while chunk := os.read(fd, _READ_SIZE):
                    chunks.append(chunk)
                data = b"".join(chunks)
        finally:
            os.close(fd)
        if self.stats is not None:
            self._count("reads", 1, "read_bytes", len(data))
        return data

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        """Exactly ``size`` bytes at ``offset`` (short only at end of file)."""
        data = os.pread(fd, size, offset)
        while 0 < len(data) < size:
            more = os.pread(fd, size - len(data), offset + len(data))
            if not more:
                break
            data += more
        self._count("reads", 1, "read_bytes", len(data))
        return data

    def listdir(self, path: str) -> list[str]:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return []

    # --- writes ------------------------------------------------------------------

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
        self.step("pwrite", str(fd))
        written = os.pwrite(fd, data, offset)
        if written < len(data):  # a short write: the rest, until all of it is written
            view = memoryview(data)[written:]
            offset += written
            while view:
                written = os.pwrite(fd, view, offset)
                view = view[written:]
                offset += written
        if self.stats is not None:
            self._count("writes", 1, "write_bytes", len(data))

    def sync(self, fd: int) -> None:
        """Make a file's data durable (fdatasync where the OS has it)."""
        if not self.fsync:
            return
        self.step("sync", str(fd))
        _sync_data(fd)
        if self.stats is not None:
            self._count("syncs", 1)

    def sync_all(self, fds: Sequence[int]) -> list[Exception | None]:
        """:meth:`sync` for many files at once, the error each met (or None): one
        ``syncfs(2)`` per filesystem they live on for :data:`SYNCFS_FROM` files or more
        where the OS has it, else an fdatasync each, side by side (:func:`each`). A failed
        syncfs fails every file it was to make durable."""
        if not self.fsync or _syncfs is None or len(fds) < SYNCFS_FROM:
            return each(self.sync, fds)
        out: list[Exception | None] = [None] * len(fds)
        filesystems: dict[int, list[int]] = {}
        for i, fd in enumerate(fds):
            try:
                self.step("sync", str(fd))
                filesystems.setdefault(os.fstat(fd).st_dev, []).append(i)
            except OSError as exc:
                out[i] = exc
        for rows in filesystems.values():
            if _syncfs(fds[rows[0]]) != 0:
                code = ctypes.get_errno()
                failed = OSError(code, f"syncfs: {os.strerror(code)}")
                for i in rows:
                    out[i] = failed
        if self.stats is not None:
            self._count("syncs", len(filesystems))
        return out

    def sync_dir(self, path: str) -> None:
        """Make renames, creations and unlinks in ``path`` durable."""
        if not self.fsync:
            return
        self.step("sync_dir", path)
        fd = os.open(path, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        try:
            os.fsync(fd)
        except OSError as exc:  # some filesystems refuse fsync on a directory
            if exc.errno not in (errno.EINVAL, errno.EBADF):
                raise
        finally:
            os.close(fd)
        if self.stats is not None:
            self._count("syncs", 1)

    def tmp_path(self, path: str) -> str:
        """The temp file a replace of ``path`` writes first (same directory)."""
        cut = path.rfind(os.sep) + 1
        return f"{path[:cut]}.{path[cut:]}.tmp"

    def replace_file(self, path: str, data: bytes | bytearray, *, sync_dir: bool = True) -> None:
        """Atomically make ``path`` hold ``data``: temp, fsync, rename, fsync dir."""
        tmp = self.tmp_path(path)
        self.step("create_tmp", tmp)
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            self.pwrite(fd, data, 0)
            self.sync(fd)
        finally:
            os.close(fd)
        self.step("replace", path)
        os.replace(tmp, path)  # raises only when nothing was renamed
        self._committing()
        if self.stats is not None:
            self._count("replaces", 1)
        if sync_dir:
            self.sync_dir(path[: path.rfind(os.sep)] or os.sep)

    def replace_many(
        self, items: Sequence[tuple[str, bytes | bytearray]]
    ) -> list[tuple[bool, Exception | None]]:
        """:meth:`replace_file` for many paths at once: one task per directory, the tasks
        side by side, each writing its temp files, fsyncing them, renaming each and then
        fsyncing the directory once. Concurrent fsyncs share the journal's commits, so a
        batch costs a few commits rather than two per path; no rename precedes its temp
        file's fsync, so a crash at any point leaves every path old or new.

        Returns ``(renamed, error)`` per item: ``(True, None)`` done and durable,
        ``(False, exc)`` nothing renamed, ``(True, exc)`` renamed but not known durable.
        """
        out: list[tuple[bool, Exception | None]] = [(False, None)] * len(items)
        folders: dict[str, list[int]] = {}
        for i, (path, _) in enumerate(items):
            folders.setdefault(path[: path.rfind(os.sep)] or os.sep, []).append(i)

        def commit_folder(folder: str) -> None:
            fds: dict[int, int] = {}
            try:
                for i in folders[folder]:
                    path, data = items[i]
                    tmp = self.tmp_path(path)
                    try:
                        self.step("create_tmp", tmp)
                        fds[i] = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
                        self.pwrite(fds[i], data, 0)
                        self.sync(fds[i])
                    except OSError as exc:
                        out[i] = (False, exc)
            finally:
                for fd in fds.values():
                    os.close(fd)
            renamed = False
            for i in folders[folder]:
                if out[i][1] is not None:
                    continue
                path = items[i][0]
                self.step("replace", path)
                try:
                    os.replace(self.tmp_path(path), path)
                except OSError as exc:
                    out[i] = (False, exc)
                    continue
                self._committing()
                self._count("replaces", 1)
                out[i] = (True, None)
                renamed = True
            if renamed:
                try:
                    self.sync_dir(folder)
                except OSError as exc:
                    for i in folders[folder]:
                        if out[i] == (True, None):
                            out[i] = (True, exc)

        names = list(folders)
        for folder, exc in zip(names, each(commit_folder, names), strict=True):
            if exc is None:
                continue
            if not isinstance(exc, OSError):  # a bug: raised, as the single path would
                raise exc
            for i in folders[folder]:  # closing a temp file failed: not known durable
                if out[i][1] is None:
                    out[i] = (out[i][0], exc)
        return out

    def open_rw(self, path: str) -> int | None:
        """An fd on an existing file to overwrite in place, or None when it is absent."""
        try:
            return os.open(path, os.O_RDWR | _O_CLOEXEC)
        except FileNotFoundError:
            return None

    def overwrite(self, fd: int, data: bytes, offset: int) -> None:
        """Overwrite bytes of an existing file in place; the caller syncs it. Readers see
        it at once, so from here on an error leaves the call's outcome unknown."""
        self._committing()
        self.pwrite(fd, data, offset)

    def write_new(self, path: str, data: bytes | bytearray) -> None:
        """Write a file no reader knows of yet, durably (no rename: its name is unique)."""
        self.step("create", path)
        fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
        try:
            self.pwrite(fd, data, 0)
            self.sync(fd)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> bool:
        """``os.replace(src, dst)``; False when ``src`` is gone. The caller syncs the dir."""
        self.step("replace", dst)
        try:
            os.replace(src, dst)
        except FileNotFoundError:
            return False
        self._committing()
        self._count("replaces", 1)
        return True

    def create_empty(self, path: str, *, sync_dir: bool = True) -> None:
        """Create ``path`` if absent: a marker whose name is its content. Markers only
        ever over-approximate (readers confirm them), so this is not a commit."""
        self.step("create", path)
        os.close(open_private(path, os.O_WRONLY))
        if sync_dir:
            self.sync_dir(os.path.dirname(path))

    def unlink(self, path: str) -> bool:
        """Remove ``path``; False when it was already gone. The caller syncs the dir."""
        self.step("unlink", path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        self._committing()
        return True

    def remove_empty_dir(self, path: str) -> bool:
        """Remove ``path`` if it is an empty folder; False when it holds something or is
        already gone. The caller syncs the parent."""
        self.step("rmdir", path)
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                return False
            raise
        return True

    def ensure_dir(self, path: str) -> None:
        """Create ``path`` and missing parents, making each new entry durable. A folder
        created here is :data:`DIR_MODE` whatever the umask."""
        if os.path.isdir(path):
            return
        parent = os.path.dirname(path)
        if parent and parent != path:
            self.ensure_dir(parent)
        self.step("mkdir", path)
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            return
        os.chmod(path, DIR_MODE)  # a umask may have taken the owner's bits away
        self.sync_dir(parent)

    def keep_private(self, path: str) -> None:
        """Make the folder ``path`` :data:`DIR_MODE` if other users may enter or list it
        and it is ours. A store's root is closed this way on every open: a store that an
        older version wrote (folders 0755, files 0644) or a folder handed over open is
        then unreachable to other users, without touching every file under it."""
        info = os.stat(path)
        if info.st_mode & 0o077 and info.st_uid == os.geteuid():
            os.chmod(path, DIR_MODE)

    # --- locks -------------------------------------------------------------------

    def open_lock(self, path: str) -> int | None:
        """An fd on the lock file ``path`` (created if absent); None if its dir is missing."""
        try:
            return open_private(path, os.O_RDWR)
        except FileNotFoundError:
            return None

    def lock(self, fd: int, *, exclusive: bool) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)

    def try_lock(self, fd: int) -> bool:
        """Take the exclusive lock if it is free now; False when another holder has it."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


__all__ = ["DIR_MODE", "FILE_MODE", "SYNC_WORKERS", "FileIO", "IOStats", "each", "open_private"]
