"""Push for the file backend: other processes' writes wake this process's followers.

Files have no server to publish anything, so the follower's side looks: one thread per
bundle (:class:`ChangeWatcher`) checks the files of the keys this process follows every
:data:`INTERVAL` seconds and wakes a key's watchers when one changed. Every write a
follower cares about changes one of them: ``head`` (the supervision row's epoch, the
transcript's commit point, an erasure) and ``recording`` are replaced by rename, so a
new one has a new inode, and ``beat`` (a heartbeat, a seal) is overwritten in place, so
its 1 KiB of bytes are compared instead of its timestamps (coarse: two writes in one
clock tick look alike). A write nobody follows costs nothing: the writer does no more
than without push, and the thread sleeps while no key is watched.

A check of a key is one ``stat`` of ``head`` and of ``recording`` and one small read of
``beat``; no lock is taken and nothing is parsed. It works on every POSIX file system
(no inotify, no extra dependency); a change the check misses (two renames inside one
clock tick that leave the same inode number, size and time) costs a follower at most
its safety poll. A key counts as pushed only once its first check (the baseline) is
taken, and its watchers are woken then (:class:`KeySubscriptions`), so a write between a
follower's first read and the baseline is read at once.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Set

from agentstores.keys import ConversationKey
from agentstores.stores.subscriptions import KeySubscriptions
from agentstores.stores.wakeups import Wakeups

from . import beat
from .header import FileRoot

INTERVAL = 0.025
"""Seconds between two checks of the watched keys' files."""

Signature = tuple[object, object, object]
"""What a check sees of a key: ``head`` and ``recording`` as (inode, mtime_ns, size) or
None, and the bytes of ``beat`` or None."""


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _contents(path: str, size: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def signature(kdir: str) -> Signature:
    """What the files of the key in ``kdir`` look like now (missing ones are None)."""
    return (
        _stat(kdir + "/head"),
        _stat(kdir + "/recording"),
        _contents(f"{kdir}/{beat.NAME}", beat.SIZE),
    )


class ChangeWatcher(KeySubscriptions):
    """One bundle's change check: a thread comparing the watched keys' files with what
    it saw last, waking the watchers of each key that changed (on their loop)."""

    def __init__(self, root: FileRoot, wakeups: Wakeups, interval: float = INTERVAL) -> None:
        super().__init__(wakeups)
        self.root = root
        self.interval = interval
        self._seen: dict[ConversationKey, tuple[str, Signature]] = {}
        self._lock = threading.Lock()
        self._watching = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.rounds = 0
        """How many checks of the watched keys ran (tests read it)."""
        self.changes = 0
        """How many key changes the checks saw."""

    def start(self) -> None:
        """Start the thread; followers of this bundle are pushed from now on."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(
            target=self._run, name="agentstores-file-changes", daemon=True
        )
        self._thread.start()
        super().start()
        self.wakeups.remote = True

    async def close(self) -> None:
        """Stop the thread (idempotent); followers poll again."""
        self.wakeups.remote = False
        await super().close()
        self._stopping.set()
        self._watching.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join)

    async def _subscribe(self, keys: Set[ConversationKey]) -> None:
        dirs = [(key, self.root.key_dir(key)) for key in keys]
        taken = await asyncio.to_thread(lambda: [(k, (d, signature(d))) for k, d in dirs])
        with self._lock:
            self._seen.update(taken)
            self._watching.set()

    async def _unsubscribe(self, keys: Set[ConversationKey]) -> None:
        with self._lock:
            for key in keys:
                self._seen.pop(key, None)
            if not self._seen:
                self._watching.clear()

    # --- the thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._watching.wait()
            if self._stopping.is_set():
                return
            changed = self._check()
            if changed:
                loop = self._loop
                if loop is None:
                    return
                try:
                    loop.call_soon_threadsafe(self._wake, changed)
                except RuntimeError:  # the loop has closed
                    return
            if self._stopping.wait(self.interval):
                return

    def _check(self) -> list[ConversationKey]:
        """One round: the keys whose files changed since the last look."""
        with self._lock:
            looked = list(self._seen.items())
        now = [(key, entry, signature(entry[0])) for key, entry in looked]
        changed = []
        with self._lock:
            self.rounds += 1
            for key, entry, sig in now:
                if sig != entry[1] and self._seen.get(key) is entry:
                    self._seen[key] = (entry[0], sig)
                    changed.append(key)
            self.changes += len(changed)
        return changed

    def _wake(self, keys: list[ConversationKey]) -> None:
        for key in keys:
            self.wakeups.notify(key)


__all__ = ["INTERVAL", "ChangeWatcher", "signature"]
