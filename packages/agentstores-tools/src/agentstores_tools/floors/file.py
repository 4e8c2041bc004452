"""The raw floor of the file backend, for ``agentstores bench``.

The same locked read-modify-write the adapter's compare-and-swap does at its core,
done directly: open the key's lock file, ``flock`` it, read the value file, write a
temp file, fsync it, ``os.replace`` it over the value, fsync the directory. One scratch
directory per client key, under a fresh directory inside the URL's root, on as many
threads as the process-wide pool the adapter's bundles share.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from agentstores_file.stores import DEFAULT_WORKERS, path_from_url

from ..bench.floor import RawFloor

_sync_data = getattr(os, "fdatasync", os.fsync)


def _write_value(directory: str, value: int) -> None:
    tmp = os.path.join(directory, ".value.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"%d %d" % (value, time.time_ns() // 1000))
        _sync_data(fd)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, "value"))
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def floor_cas(directory: str, op: int) -> bool:
    """One raw compare-and-swap: ``op`` -> ``op + 1`` in ``directory``'s value file."""
    lock = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(os.path.join(directory, "value"), "rb") as f:
            current = int(f.read().split()[0])
        if current != op:
            return False
        _write_value(directory, op + 1)
        return True
    finally:
        os.close(lock)


class FileFloor(RawFloor):
    name = "flock(lock file) + read + write temp + fsync + os.replace + fsync dir"

    def __init__(self) -> None:
        self.scratch: str | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.dirs: list[str] = []

    async def setup(self, url: str, clients: int) -> None:
        root = path_from_url(url)
        os.makedirs(root, exist_ok=True)
        self.scratch = tempfile.mkdtemp(prefix=".floor-", dir=root)
        self.dirs = []
        for client in range(clients):
            directory = os.path.join(self.scratch, str(client))
            os.mkdir(directory)
            _write_value(directory, 0)
            self.dirs.append(directory)
        # As many threads as the pool the adapter's bundles share.
        self.pool = ThreadPoolExecutor(DEFAULT_WORKERS, thread_name_prefix="agentstores-floor")

    async def cas(self, client: int, op: int) -> bool:
        assert self.pool is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, floor_cas, self.dirs[client], op)

    async def close(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True)
        scratch, self.scratch = self.scratch, None
        if scratch is not None:
            await asyncio.to_thread(shutil.rmtree, scratch, True)


__all__ = ["FileFloor", "floor_cas"]
