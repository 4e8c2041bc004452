"""One root directory of the file backend: its layout, key locks, key headers and recovery.

Layout under the root directory (no raw id is ever a path segment)::

    FORMAT                              format marker
    keys/<d[:2]>/<d>/                   one directory per ConversationKey, d = key.digest
        lock                            flock target; created once, never replaced
        head                            the key header + supervision row + transcript
                                        metadata (JSON, replaced atomically)
        beat                            the row's heartbeats: two checksummed slots
                                        overwritten in turn (see beat.py)
        state  recording                one record each (replaced atomically)
        tokens/<sha256(token_id)>       one pause token each
        msgs.dat msgs.idx *.idx ids-*.tbl   the transcript (see transcript.py)
    owners/<o[:2]>/<o>/<d>              listing entries: o = sha256 of (tenant, owner)
                                        (<o> goes with the owner's last entry)
    oauth/u/<u[:2]>/<u>/{lock,<s>.rec}  user integrations: u = sha256(tenant, user)
    oauth/c/<t[:2]>/<t>/{lock,<s>.rec}  client info: t = sha256(tenant)
    oauth/pending/<p[:2]>/<p>/<u>.<s>   pending-state index: p = sha256(state)

Every write to a key's files happens under an exclusive ``flock`` on its ``lock`` file,
which is never replaced (locking a file that is then renamed over loses updates).
Readers of several files (transcripts) take the shared lock; single-file reads need no
lock because every file is replaced atomically (``beat``, the one file overwritten in
place, is read slot by slot, each slot checksummed). The header is written before any other
file of a write that claims the key or raises its fence, and is the commit point of
transcript changes, so a crash at any step leaves every record old or new.
"""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from agentstores.errors import (
    BackendUnavailableError,
    Refusal,
    UnknownOutcomeError,
    refusal_error,
)
from agentstores.keys import ConversationKey, encode_component
from agentstores.stores import kit

from .codec import dumps, loads, split_record
from .fsio import FileIO
from .transcript import corrupt

FORMAT = b"agentstores-file 2\n"
"""The format marker. Format 2 adds the heartbeat file (``beat.py``); a format 1
directory is read as is and its marker moved to 2 on open, so a process of an older
version refuses it rather than read heartbeats it cannot see."""
FORMAT_1 = b"agentstores-file 1\n"

Head = dict[str, Any]
"""A key header as stored: ``owner``, ``fence``, ``shared``, ``sup``, ``conv`` (live), or
a tombstone ``kc``, ``erased_until``, ``fence``; ``redo`` names renames still due."""

ABSENT, EXPIRED, LIVE, ERASED = "absent", "expired", "live", "erased"
"""A header's status: none, a tombstone past its TTL, a live key, an erased key."""


def name_digest(*parts: str) -> str:
    """The hex name a tuple of ids gets on disk (ids are never path segments)."""
    return hashlib.sha256(":".join(encode_component(p) for p in parts).encode()).hexdigest()


@functools.lru_cache(maxsize=8192)
def _names(key: ConversationKey) -> tuple[str, str]:
    """``(digest, storage_name)`` of a key, cached: both are pure-Python encodings."""
    return key.digest, key.storage_name


def key_check(key: ConversationKey) -> str:
    """What a tombstone records of its key: enough to refuse a colliding digest."""
    return hashlib.blake2b(key.storage_name.encode(), digest_size=16).hexdigest()


class _Held:
    """The context manager :meth:`FileRoot.locked` returns (a class: it is on every call)."""

    __slots__ = ("before", "create", "exclusive", "fd", "kdir", "root")

    def __init__(self, root: FileRoot, kdir: str, exclusive: bool, create: bool) -> None:
        self.root, self.kdir, self.exclusive, self.create = root, kdir, exclusive, create
        self.fd: int | None = None
        self.before = 0

    def __enter__(self) -> bool:
        root, io = self.root, self.root.io
        path = root.lock_path(self.kdir)
        fd = io.open_lock(path)
        if fd is None:
            if not self.create:
                return False
            io.ensure_dir(self.kdir)
            fd = io.open_lock(path)
            if fd is None:
                raise BackendUnavailableError(f"cannot create the key directory {self.kdir}")
        self.fd = fd
        try:
            io.lock(fd, exclusive=self.exclusive)
        except BaseException:
            self.fd = None
            os.close(fd)
            raise
        self.before = io.commits
        return True

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        fd, self.fd = self.fd, None
        if fd is None:
            return
        os.close(fd)
        if isinstance(exc, OSError) and self.root.io.commits != self.before:
            raise UnknownOutcomeError(f"the write may or may not have taken effect: {exc}") from exc


def _rule_fields(h: Head | None, status: str) -> dict[str, Any]:
    """What the kit's key-header rule reads from a header: owner (None when the key is
    unclaimed or its tombstone expired), fence, and whether it is erased."""
    if status == LIVE and h is not None:
        return {"owner": h["owner"], "fence": h["fence"], "erased": False}
    return {"owner": None, "fence": 0, "erased": status == ERASED}


def erased_until(h: Head | None) -> datetime | None:
    """When a tombstone header lapses (its erase time plus the TTL, store clock), or None
    for a header that is no tombstone."""
    until = h.get("erased_until") if h is not None else None
    return None if until is None else kit.from_micros(until)


class FileRoot:
    """The shared part of every file store of one bundle: paths, locks, headers, clock.

    All calls block; the stores run them off the event loop. A subclass may change
    any step (the tests plant known flaws this way).
    """

    def __init__(
        self,
        path: str,
        *,
        io: FileIO,
        clock: Callable[[], datetime] | None = None,
        tombstone_ttl: timedelta = kit.DEFAULT_TOMBSTONE_TTL,
    ) -> None:
        self.path = path
        self.io = io
        self.clock = clock
        self.tombstone_ttl = tombstone_ttl
        self.keys_root = os.path.join(path, "keys")
        self.owners_root = os.path.join(path, "owners")
        self.oauth_root = os.path.join(path, "oauth")

    # --- setup and clock ---------------------------------------------------------

    def setup(self) -> None:
        """Create the root, close it to other users, and check its format marker."""
        self.io.ensure_dir(self.path)
        self.io.keep_private(self.path)
        marker = os.path.join(self.path, "FORMAT")
        with self.locked(self.path, exclusive=True, create=True):
            found = self.io.read_file(marker)
            if found is None or found == FORMAT_1:
                self.io.replace_file(marker, FORMAT)
                found = FORMAT
        if found != FORMAT:
            raise BackendUnavailableError(
                f"{self.path} holds another format ({found[:40]!r}); expected {FORMAT!r}"
            )

    def now_us(self) -> int:
        """The store clock in microseconds since the Unix epoch."""
        if self.clock is None:
            return time.time_ns() // 1000
        return kit.to_micros(self.clock())

    def now(self) -> datetime:
        """The store clock."""
        return kit.from_micros(self.now_us())

    # --- paths -------------------------------------------------------------------

    def key_dir(self, key: ConversationKey) -> str:
        d = _names(key)[0]
        return f"{self.keys_root}/{d[:2]}/{d}"

    def key_dir_of_digest(self, digest: str) -> str:
        return os.path.join(self.keys_root, digest[:2], digest)

    def owner_dir(self, tenant: str, owner: str) -> str:
        """Where the listing entries of ``owner``'s conversations in ``tenant`` live."""
        o = name_digest(tenant, owner)
        return os.path.join(self.owners_root, o[:2], o)

    def lock_path(self, kdir: str) -> str:
        return kdir + "/lock"

    def head_path(self, kdir: str) -> str:
        return kdir + "/head"

    def locked(self, kdir: str, *, exclusive: bool, create: bool) -> _Held:
        """Hold the key's flock for a ``with`` block; it yields False (no lock) when the
        key has no directory and ``create`` is off. OS errors after a rename in the
        block become unknown outcomes."""
        return _Held(self, kdir, exclusive, create)

    # --- headers -----------------------------------------------------------------

    def load_head(self, kdir: str) -> Head | None:
        """The header file of a key directory as stored (no key check), or None."""
        return self.parse_head(self.io.read_file(self.head_path(kdir)), kdir)

    def parse_head(self, raw: bytes | None, kdir: str) -> Head | None:
        """A header file's bytes as a header (no key check), or None for no file."""
        if raw is None:
            return None
        head = loads(raw, f"header of {kdir}")
        if not isinstance(head, dict):
            raise corrupt(f"header of {kdir} is not an object")
        return head

    def read_head(self, kdir: str, key: ConversationKey) -> Head | None:
        """The header of ``key``'s directory, refusing one that records another key."""
        return self.checked_head(self.load_head(kdir), key)

    @staticmethod
    def checked_head(head: Head | None, key: ConversationKey) -> Head | None:
        """``head``, refused when it records another key than ``key``."""
        if head is None:
            return None
        stored = head.get("key")
        check = head.get("kc")
        if (stored is not None and stored != _names(key)[1]) or (
            check is not None and check != key_check(key)
        ):
            raise refusal_error(
                Refusal.EXISTS, "two keys share a storage digest; refusing to mix them", key=key
            )
        return head

    def head(self, kdir: str, key: ConversationKey, now: int) -> tuple[Head | None, str]:
        """The header and its status: absent, expired (tombstone past its TTL, data
        may linger until reuse), live or erased."""
        return self.head_status(self.read_head(kdir, key), now)

    @staticmethod
    def head_status(h: Head | None, now: int) -> tuple[Head | None, str]:
        """:meth:`head` for a header already read."""
        if h is None:
            return None, ABSENT
        until = h.get("erased_until")
        if until is not None:
            return (None, EXPIRED) if until <= now else (h, ERASED)
        return h, LIVE

    def put_head(self, kdir: str, h: Head) -> None:
        self.io.replace_file(self.head_path(kdir), dumps(h))

    # --- the key-header rule -----------------------------------------------------

    @staticmethod
    def can_read(h: Head | None, status: str, principal: str) -> bool:
        """Whether ``principal`` sees the key (the kit's visibility rule)."""
        if status != LIVE or h is None:
            return False
        return kit.can_read(
            owner=h["owner"], shared_with=h["shared"], erased=False, principal=principal
        )

    @staticmethod
    def judge_write(
        h: Head | None, status: str, principal: str, epoch: int | None
    ) -> Refusal | None:
        """The kit's key-header rule for a write by ``principal`` at ``epoch``."""
        if status == LIVE and h is not None:
            return kit.judge_write(
                owner=h["owner"], fence=h["fence"], erased=False, principal=principal, epoch=epoch
            )
        return kit.judge_write(
            owner=None, fence=0, erased=status == ERASED, principal=principal, epoch=epoch
        )

    @staticmethod
    def check_write(
        key: ConversationKey, h: Head | None, status: str, principal: str, epoch: int | None
    ) -> None:
        """Raise for an erased key, another owner or an epoch below the fence."""
        kit.check_write(
            key,
            **_rule_fields(h, status),
            principal=principal,
            epoch=epoch,
            erased_until=erased_until(h) if status == ERASED else None,
        )

    def claim(
        self, kdir: str, key: ConversationKey, h: Head | None, status: str, principal: str
    ) -> Head:
        """The live header to write: ``h``, or a new one owned by ``principal`` (after
        clearing what an expired tombstone left behind)."""
        if status == LIVE and h is not None:
            return h
        if status == EXPIRED:
            self.purge(kdir)
        return {
            "key": _names(key)[1],
            "owner": principal,
            "fence": 0,
            "shared": [],
            "sup": None,
            "conv": None,
        }

    def prepare(
        self,
        kdir: str,
        key: ConversationKey,
        h: Head | None,
        status: str,
        principal: str,
        epoch: int | None,
    ) -> tuple[Head, bool]:
        """The header after a write by ``principal`` at ``epoch`` (claimed, fence raised)
        and whether it differs from ``h``; nothing is written yet."""
        new = self.claim(kdir, key, h, status, principal)
        changed = new is not h
        fence = kit.raised_fence(new["fence"], epoch)
        if fence != new["fence"]:
            new["fence"] = fence
            changed = True
        return new, changed

    # --- side files and recovery -------------------------------------------------

    def commit_side(self, kdir: str, new: Head, changed: bool, name: str, body: bytes) -> None:
        """Make side file ``name`` (state, recording, a token) hold ``body`` (``b""``
        means removed), atomically with the header change ``changed`` says is due.

        Without a header change the file is simply replaced. With one, the body goes to
        a fresh file first and the header, the one commit point, names the rename that
        completes the write (``redo``); the rename follows at once and is redone by the
        next writer of the key (:meth:`recover`) if a crash came in between.
        """
        path = os.path.join(kdir, name)
        if not changed:
            self.io.replace_file(path, body)
            return
        folder, base = os.path.split(path)
        src = os.path.join(folder, f".{base}.{secrets.token_hex(8)}.redo")
        self.io.write_new(src, body)
        new["redo"] = [[os.path.relpath(src, kdir), name]]
        self.put_head(kdir, new)
        self.recover(kdir, new)

    def recover(self, kdir: str, h: Head | None) -> None:
        """Finish the renames a committed header names (idempotent: sources are unique).
        Every writer of side files calls this first, under the key's exclusive lock."""
        redo = h.pop("redo", None) if h is not None else None
        if not redo:
            return
        folders = set()
        for src, dst in redo:
            target = os.path.join(kdir, dst)
            if self.io.rename(os.path.join(kdir, src), target):
                folders.add(os.path.dirname(target))
        for folder in folders:
            self.io.sync_dir(folder)

    def read_side(self, kdir: str, h: Head, name: str) -> bytes | None:
        """A side file as committed: the pending rename's source if the header names
        one that is still there, else the file; an empty file is a removed one."""
        for src, dst in h.get("redo") or ():
            if dst == name:
                raw = self.io.read_file(os.path.join(kdir, src))
                if raw is not None:
                    return raw or None
        return self.io.read_file(os.path.join(kdir, name)) or None

    def read_record(self, kdir: str, h: Head, name: str) -> tuple[dict[str, Any], bytes] | None:
        """A record side file (recording, a token) as committed, split in meta and body."""
        raw = self.read_side(kdir, h, name)
        return None if raw is None else split_record(raw, name)

    def purge(self, kdir: str) -> None:
        """Remove every data file of a key (keeps ``lock`` and ``head``)."""
        for name in self.io.listdir(kdir):
            if name in ("lock", "head"):
                continue
            path = os.path.join(kdir, name)
            if name == "tokens":
                for token in self.io.listdir(path):
                    self.io.unlink(os.path.join(path, token))
                self.io.sync_dir(path)
                continue
            self.io.unlink(path)
        self.io.sync_dir(kdir)


__all__ = [
    "ABSENT",
    "ERASED",
    "EXPIRED",
    "LIVE",
    "FileRoot",
    "Head",
    "erased_until",
    "key_check",
    "name_digest",
]
