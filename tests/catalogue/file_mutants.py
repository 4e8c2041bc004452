"""Deliberately broken variants of the file backend, each breaking one promise.

``DataFileLockStores`` takes its ``flock`` on the data file itself (the key header,
which takeovers, appends and state writes replace with ``os.replace``; heartbeats no
longer do) instead of on the separate lock file that is never replaced. A writer that
waited on the old inode gets its lock after the rename, while a newcomer locks the new
inode at the same time: two writers in the critical section at once, so two
compare-and-swaps with the same expectation both win (lost updates, measured). Temp
names are made unique so the flaw shows as lost updates rather than as writers
clobbering one temp file.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from agentstores_file.fsio import FileIO
from agentstores_file.header import FileRoot, Head
from agentstores_file.stores import FileStores


class UniqueTempIO(FileIO):
    def tmp_path(self, path: str) -> str:
        head, tail = os.path.split(path)
        return os.path.join(head, f".{tail}.{uuid.uuid4().hex}.tmp")


class DataFileLockRoot(FileRoot):
    """Locks ``head`` (replaced on every write) rather than ``lock`` (never replaced)."""

    def lock_path(self, kdir: str) -> str:
        return self.head_path(kdir)

    def parse_head(self, raw: bytes | None, kdir: str) -> Head | None:
        # Opening the lock creates an empty header; the real root never sees one.
        if raw == b"":
            return None
        return super().parse_head(raw, kdir)


class DataFileLockStores(FileStores):
    """BROKEN: the file backend with its lock on the data file."""

    root_class = DataFileLockRoot

    def __init__(self, url: str, **options: Any) -> None:
        options.setdefault("io", UniqueTempIO(fsync=options.pop("fsync", True)))
        super().__init__(url, **options)


MUTANTS = {"data_file_lock": "tests.catalogue.file_mutants:DataFileLockStores"}
"""Broken promise -> factory spec (``module:callable`` taking a URL)."""
