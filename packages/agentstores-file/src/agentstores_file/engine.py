"""The file backend's storage engine: plain synchronous code run on worker threads.

Layout under the root directory (no raw id is ever a path segment)::

    FORMAT                              format marker
    keys/<d[:2]>/<d>/                   one directory per ConversationKey, d = key.digest
        lock                            flock target; created once, never replaced
        head                            the key header + supervision row + transcript
                                        metadata (JSON, replaced atomically)
        state  recording                one record each (replaced atomically)
        tokens/<sha256(token_id)>       one pause token each
        msgs.dat msgs.idx *.idx ids-*.tbl   the transcript (see transcript.py)
    owners/<o[:2]>/<o>/<d>              listing entries: o = sha256 of (tenant, owner)
    oauth/u/<u[:2]>/<u>/{lock,<s>.rec}  user integrations: u = sha256(tenant, user)
    oauth/c/<t[:2]>/<t>/{lock,<s>.rec}  client info: t = sha256(tenant)
    oauth/pending/<p[:2]>/<p>/<u>.<s>   pending-state index: p = sha256(state)

Every write to a key's files happens under an exclusive ``flock`` on its ``lock`` file,
which is never replaced (locking a file that is then renamed over loses updates).
Readers of several files (transcripts) take the shared lock; single-file reads need no
lock because every file is replaced atomically. The header is written before any other
file of a write that claims the key or raises its fence, and is the commit point of
transcript changes, so a crash at any step leaves every record old or new.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any

from agentstores.errors import (
    AlreadyClaimedError,
    BackendUnavailableError,
    ConflictError,
    ErasedError,
    ExpiredError,
    FencedError,
    NotFoundError,
    NotOwnedError,
    StaleWriteError,
    UnknownOutcomeError,
    UsageError,
)
from agentstores.keys import ConversationKey, encode_component
from agentstores.models import (
    ClientInfo,
    ConversationInfo,
    Page,
    PendingAuthorization,
    RecordedEvent,
    StoredMessage,
    SupervisionRow,
    TranscriptMessage,
    UserIntegration,
)
from agentstores.stores import UNSET, EncodedMessage, Expired, IdleFor, OverCap, SweepRule
from agentstores.stores import TranscriptQuery as Query

from .fsio import FileIO
from .transcript import (
    Entry,
    NewMessage,
    Transcript,
    corrupt,
    new_meta,
    transcript_files,
)

FORMAT = b"agentstores-file 1\n"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US = timedelta(microseconds=1)
COPY_CHUNK = 512


def to_us(value: datetime) -> int:
    return (value - EPOCH) // US


def from_us(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


def _sha(*parts: str) -> str:
    return hashlib.sha256(":".join(encode_component(p) for p in parts).encode()).hexdigest()


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


def _loads(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode())
    except ValueError:
        raise corrupt(f"{what} does not parse") from None


def _split(raw: bytes, what: str) -> tuple[dict[str, Any], bytes]:
    """A record file: one JSON line of metadata, then the opaque JSON body."""
    line, sep, body = raw.partition(b"\n")
    if not sep:
        raise corrupt(f"{what} has no body")
    meta = _loads(line, what)
    if not isinstance(meta, dict):
        raise corrupt(f"{what} metadata is not an object")
    return meta, body


@functools.lru_cache(maxsize=8192)
def _names(key: ConversationKey) -> tuple[str, str]:
    """``(digest, storage_name)`` of a key, cached: both are pure-Python encodings."""
    return key.digest, key.storage_name


class _Held:
    """The context manager :meth:`Engine.locked` returns (a class: it is on every call)."""

    __slots__ = ("before", "create", "engine", "exclusive", "fd", "kdir")

    def __init__(self, engine: Engine, kdir: str, exclusive: bool, create: bool) -> None:
        self.engine, self.kdir, self.exclusive, self.create = engine, kdir, exclusive, create
        self.fd: int | None = None
        self.before = 0

    def __enter__(self) -> bool:
        engine, io = self.engine, self.engine.io
        path = engine.lock_path(self.kdir)
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
        if isinstance(exc, OSError) and self.engine.io.commits != self.before:
            raise UnknownOutcomeError(f"the write may or may not have taken effect: {exc}") from exc


def _key_check(key: ConversationKey) -> str:
    return hashlib.blake2b(key.storage_name.encode(), digest_size=16).hexdigest()


def _reencode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


Head = dict[str, Any]
ABSENT, EXPIRED, LIVE, ERASED = "absent", "expired", "live", "erased"


class Engine:
    """Every store operation of one root directory, as blocking calls."""

    def __init__(
        self,
        root: str,
        *,
        io: FileIO,
        clock: Callable[[], datetime] | None = None,
        tombstone_ttl: timedelta = timedelta(days=30),
    ) -> None:
        self.root = root
        self.io = io
        self.clock = clock
        self.tombstone_ttl = tombstone_ttl
        self.keys_root = os.path.join(root, "keys")
        self.owners_root = os.path.join(root, "owners")
        self.oauth_root = os.path.join(root, "oauth")

    # --- setup and clock ---------------------------------------------------------

    def setup(self) -> None:
        """Create the root and check its format marker."""
        self.io.ensure_dir(self.root)
        marker = os.path.join(self.root, "FORMAT")
        with self.locked(self.root, exclusive=True, create=True):
            found = self.io.read_file(marker)
            if found is None:
                self.io.replace_file(marker, FORMAT)
        if found is not None and found != FORMAT:
            raise BackendUnavailableError(
                f"{self.root} holds another format ({found[:40]!r}); expected {FORMAT!r}"
            )

    def now_us(self) -> int:
        if self.clock is None:
            return time.time_ns() // 1000
        return to_us(self.clock())

    def now(self) -> datetime:
        return from_us(self.now_us())

    # --- keys, locks, heads ------------------------------------------------------

    def key_dir(self, key: ConversationKey) -> str:
        d = _names(key)[0]
        return f"{self.keys_root}/{d[:2]}/{d}"

    def lock_path(self, kdir: str) -> str:
        return kdir + "/lock"

    def head_path(self, kdir: str) -> str:
        return kdir + "/head"

    def locked(self, kdir: str, *, exclusive: bool, create: bool) -> _Held:
        """Hold the key's flock for a ``with`` block; it yields False (no lock) when the
        key has no directory and ``create`` is off. OS errors after a rename in the
        block become unknown outcomes."""
        return _Held(self, kdir, exclusive, create)

    def load_head(self, kdir: str) -> Head | None:
        """The header file of a key directory as stored (no key check), or None."""
        raw = self.io.read_file(self.head_path(kdir))
        if raw is None:
            return None
        head = _loads(raw, f"header of {kdir}")
        if not isinstance(head, dict):
            raise corrupt(f"header of {kdir} is not an object")
        return head

    def read_head(self, kdir: str, key: ConversationKey) -> Head | None:
        head = self.load_head(kdir)
        if head is None:
            return None
        stored = head.get("key")
        if stored is not None and stored != _names(key)[1]:
            raise ConflictError("two keys share a storage digest; refusing to mix them", key=key)
        check = head.get("kc")
        if check is not None and check != _key_check(key):
            raise ConflictError("two keys share a storage digest; refusing to mix them", key=key)
        return head

    def head(self, kdir: str, key: ConversationKey, now: int) -> tuple[Head | None, str]:
        """The header and its status: absent, expired (tombstone past its TTL, data
        may linger until reuse), live or erased."""
        h = self.read_head(kdir, key)
        if h is None:
            return None, ABSENT
        until = h.get("erased_until")
        if until is not None:
            return (None, EXPIRED) if until <= now else (h, ERASED)
        return h, LIVE

    def put_head(self, kdir: str, h: Head) -> None:
        self.io.replace_file(self.head_path(kdir), _dumps(h))

    @staticmethod
    def visible(h: Head | None, status: str, principal: str) -> bool:
        return (
            h is not None
            and status == LIVE
            and (h["owner"] == principal or principal in h["shared"])
        )

    @staticmethod
    def check_write(
        key: ConversationKey, h: Head | None, status: str, principal: str, epoch: int | None
    ) -> None:
        """Raise for an erased key, another owner or an epoch below the fence."""
        if status == ERASED:
            raise ErasedError("the conversation was erased", key=key)
        if status != LIVE or h is None:
            return
        if h["owner"] != principal:
            raise NotOwnedError("another principal owns this conversation", key=key)
        if epoch is not None and epoch < h["fence"]:
            raise FencedError(
                f"epoch {epoch} is below the fence {h['fence']}",
                key=key,
                epoch=epoch,
                fence=h["fence"],
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
        if epoch is not None and epoch > new["fence"]:
            new["fence"] = epoch
            changed = True
        return new, changed

    def commit_write(
        self,
        kdir: str,
        key: ConversationKey,
        h: Head | None,
        status: str,
        principal: str,
        epoch: int | None,
    ) -> Head:
        """Claim and raise the fence, writing the header when either changes."""
        new, changed = self.prepare(kdir, key, h, status, principal, epoch)
        if changed:
            self.put_head(kdir, new)
        return new

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

    def owner_dir(self, tenant: str, owner: str) -> str:
        o = _sha(tenant, owner)
        return os.path.join(self.owners_root, o[:2], o)

    def key_dir_of_digest(self, digest: str) -> str:
        return os.path.join(self.keys_root, digest[:2], digest)

    # --- record files (state, recording, tokens) -------------------------------------

    @staticmethod
    def _record(meta: dict[str, Any], body: bytes) -> bytes:
        return _dumps(meta) + b"\n" + body

    def _get_record(self, kdir: str, h: Head, name: str) -> tuple[dict[str, Any], bytes] | None:
        raw = self.read_side(kdir, h, name)
        return None if raw is None else _split(raw, name)

    # --- supervision -------------------------------------------------------------

    def sup_cas(
        self, key: ConversationKey, principal: str, expected: int | None, row: SupervisionRow
    ) -> bool:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=True):
            now = self.now_us()
            h, status = self.head(kdir, key, now)
            if status == ERASED:
                return False
            current = None
            if status == LIVE and h is not None:
                if h["owner"] != principal:
                    raise NotOwnedError("another principal owns this conversation", key=key)
                if row.epoch < h["fence"]:
                    return False
                current = h["sup"]
            if expected is None:
                if current is not None:
                    return False
            elif current is None or current["e"] != expected:
                return False
            new = self.claim(kdir, key, h, status, principal)
            new["fence"] = max(new["fence"], row.epoch)
            new["sup"] = {"s": row.status, "m": row.message_id, "e": row.epoch, "hb": now}
            self.put_head(kdir, new)
            return True

    def sup_read(
        self, key: ConversationKey, principal: str
    ) -> tuple[SupervisionRow | None, datetime, int]:
        kdir = self.key_dir(key)
        now = self.now_us()
        h, status = self.head(kdir, key, now)
        if not self.visible(h, status, principal) or h is None:
            return None, from_us(now), 0
        sup = h["sup"]
        row = None
        if sup is not None:
            row = SupervisionRow(
                status=sup["s"],
                message_id=sup["m"],
                epoch=sup["e"],
                heartbeat_at=from_us(sup["hb"]),
                owner=h["owner"],
            )
        return row, from_us(now), int(h["fence"])

    def sup_delete(self, key: ConversationKey, principal: str, message_id: str, epoch: int) -> bool:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            h, status = self.head(kdir, key, self.now_us())
            if status != LIVE or h is None:
                return False
            self.check_write(key, h, status, principal, None)
            sup = h["sup"]
            if sup is None or sup["m"] != message_id or sup["e"] != epoch:
                return False
            h["sup"] = None
            self.put_head(kdir, h)
            return True

    # --- recording ---------------------------------------------------------------

    def rec_put(
        self, key: ConversationKey, principal: str, event: RecordedEvent, message: bytes
    ) -> bool:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=True):
            h, status = self.head(kdir, key, self.now_us())
            self.check_write(key, h, status, principal, event.epoch)
            current = None
            if status == LIVE and h is not None:
                self.recover(kdir, h)
                current = self._get_record(kdir, h, "recording")
            if current is not None:
                stored = current[0]
                if event.epoch < stored["e"]:
                    raise FencedError(
                        f"epoch {event.epoch} is below the recording's {stored['e']}",
                        key=key,
                        epoch=event.epoch,
                        fence=stored["e"],
                    )
                if (
                    stored["m"] == event.message_id
                    and stored["e"] == event.epoch
                    and event.index < stored["i"]
                ):
                    return False
            new, changed = self.prepare(kdir, key, h, status, principal, event.epoch)
            meta = {"m": event.message_id, "e": event.epoch, "i": event.index}
            self.commit_side(kdir, new, changed, "recording", self._record(meta, message))
            return True

    def rec_read(self, key: ConversationKey, principal: str) -> RecordedEvent | None:
        kdir = self.key_dir(key)
        h, status = self.head(kdir, key, self.now_us())
        if not self.visible(h, status, principal) or h is None:
            return None
        found = self._get_record(kdir, h, "recording")
        if found is None:
            return None
        meta, body = found
        return RecordedEvent(meta["i"], _loads(body, "recording"), meta["m"], meta["e"])

    def rec_delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            h, status = self.head(kdir, key, self.now_us())
            if status in (ABSENT, EXPIRED) or h is None:
                return False
            self.check_write(key, h, status, principal, epoch)
            self.recover(kdir, h)
            found = self._get_record(kdir, h, "recording")
            new, changed = self.prepare(kdir, key, h, status, principal, epoch)
            if found is None or found[0]["m"] != message_id:
                if changed:
                    self.put_head(kdir, new)
                return False
            self.commit_side(kdir, new, changed, "recording", b"")
            return True

    # --- agent state -------------------------------------------------------------

    def state_load(self, key: ConversationKey, principal: str) -> bytes | None:
        kdir = self.key_dir(key)
        h, status = self.head(kdir, key, self.now_us())
        if not self.visible(h, status, principal) or h is None:
            return None
        return self.read_side(kdir, h, "state")

    def state_save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=True):
            h, status = self.head(kdir, key, self.now_us())
            self.check_write(key, h, status, principal, epoch)
            self.recover(kdir, h)
            new, changed = self.prepare(kdir, key, h, status, principal, epoch)
            self.commit_side(kdir, new, changed, "state", blob)

    def state_delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return
            h, status = self.head(kdir, key, self.now_us())
            if status in (ABSENT, EXPIRED) or h is None:
                return
            self.check_write(key, h, status, principal, epoch)
            self.recover(kdir, h)
            new, changed = self.prepare(kdir, key, h, status, principal, epoch)
            if self.read_side(kdir, h, "state") is not None:
                self.commit_side(kdir, new, changed, "state", b"")
            elif changed:
                self.put_head(kdir, new)

    # --- pause tokens ------------------------------------------------------------

    @staticmethod
    def token_name(token_id: str) -> str:
        return "tokens/" + hashlib.sha256(token_id.encode()).hexdigest()

    def _token(self, kdir: str, h: Head, token_id: str) -> tuple[dict[str, Any], bytes] | None:
        found = self._get_record(kdir, h, self.token_name(token_id))
        if found is not None and found[0]["t"] != token_id:
            raise ConflictError("two pause token ids share a storage digest")
        return found

    def token_put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload: bytes,
        expires_at: datetime,
        epoch: int | None,
    ) -> None:
        kdir = self.key_dir(key)
        name = self.token_name(token_id)
        with self.locked(kdir, exclusive=True, create=True):
            h, status = self.head(kdir, key, self.now_us())
            self.check_write(key, h, status, principal, epoch)
            if status == LIVE and h is not None:
                self.recover(kdir, h)
                if self._token(kdir, h, token_id) is not None:
                    raise ConflictError(f"pause token {token_id!r} already exists", key=key)
            new, changed = self.prepare(kdir, key, h, status, principal, epoch)
            self.io.ensure_dir(os.path.join(kdir, "tokens"))
            meta = {"t": token_id, "o": principal, "x": to_us(expires_at), "s": "pending"}
            self.commit_side(kdir, new, changed, name, self._record(meta, payload))

    def _token_for(
        self, kdir: str, key: ConversationKey, token_id: str, principal: str
    ) -> tuple[Head, dict[str, Any], bytes]:
        h, status = self.head(kdir, key, self.now_us())
        found = None
        if status == LIVE and h is not None:
            self.recover(kdir, h)
            found = self._token(kdir, h, token_id)
        if h is None or status != LIVE or h["owner"] != principal or found is None:
            raise NotFoundError("no such pause token", key=key)
        return h, found[0], found[1]

    def token_claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                raise NotFoundError("no such pause token", key=key)
            h, meta, payload = self._token_for(kdir, key, token_id, principal)
            if meta["s"] != "pending":
                raise AlreadyClaimedError(f"pause token {token_id!r} is {meta['s']}", key=key)
            if meta["x"] <= self.now_us():
                raise ExpiredError(f"pause token {token_id!r} expired", key=key)
            meta["s"] = "claimed"
            self.commit_side(kdir, h, False, self.token_name(token_id), self._record(meta, payload))
            return payload

    def token_abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                raise NotFoundError("no such pause token", key=key)
            h, meta, payload = self._token_for(kdir, key, token_id, principal)
            if meta["s"] != "abandoned":
                meta["s"] = "abandoned"
                name = self.token_name(token_id)
                self.commit_side(kdir, h, False, name, self._record(meta, payload))

    # --- conversations: writes -----------------------------------------------------

    def _owned(
        self, kdir: str, key: ConversationKey, principal: str, epoch: int | None, now: int
    ) -> tuple[Head, str]:
        h, status = self.head(kdir, key, now)
        if status == ERASED:
            raise ErasedError("the conversation was erased", key=key)
        if h is None or status != LIVE or h["conv"] is None:
            raise NotFoundError("no such conversation", key=key)
        self.check_write(key, h, status, principal, epoch)
        return h, status

    def _new_conversation(self, kdir: str, key: ConversationKey, h: Head, now: int) -> None:
        """Start an empty transcript: clear files a crash or an old life left behind,
        and enter the key in its owner's listing before the header names it."""
        stale = transcript_files(self.io.listdir(kdir))
        for name in stale:
            self.io.unlink(os.path.join(kdir, name))
        if stale:
            self.io.sync_dir(kdir)
        owners = self.owner_dir(key.tenant, h["owner"])
        self.io.ensure_dir(owners)
        self.io.create_empty(os.path.join(owners, key.digest))
        h["conv"] = new_meta(now)

    def append(
        self,
        key: ConversationKey,
        principal: str,
        messages: list[EncodedMessage],
        *,
        create_if_absent: bool,
        last_turn_status: str | None,
        expected_last_message_id: Any,
        epoch: int | None,
        title: str | None,
        expires_at: datetime | None,
    ) -> list[StoredMessage]:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=create_if_absent) as exists:
            if not exists:
                raise NotFoundError("no such conversation", key=key)
            now = self.now_us()
            h, status = self.head(kdir, key, now)
            if status == ERASED:
                raise ErasedError("the conversation was erased", key=key)
            conv = h["conv"] if status == LIVE and h is not None else None
            if conv is None and not create_if_absent:
                raise NotFoundError("no such conversation", key=key)
            self.check_write(key, h, status, principal, epoch)
            with ExitStack() as stack:
                t = None
                if conv is not None:
                    t = stack.enter_context(Transcript(self.io, kdir, conv, write=True))
                    fresh = [m for m in messages if t.find(m.message.id) is None]
                else:
                    fresh = list(messages)
                if messages and not fresh:
                    return []
                if expected_last_message_id is not UNSET:
                    tail = conv["tail"] if conv is not None else None
                    if tail != expected_last_message_id:
                        raise StaleWriteError(
                            f"transcript tail is {tail!r}, expected {expected_last_message_id!r}",
                            key=key,
                            tail=tail,
                        )
                new = self.claim(kdir, key, h, status, principal)
                if conv is None:
                    self._new_conversation(kdir, key, new, now)
                    conv = new["conv"]
                    t = stack.enter_context(Transcript(self.io, kdir, conv, write=True))
                assert t is not None
                if epoch is not None and epoch > new["fence"]:
                    new["fence"] = epoch
                last = conv["last"]
                stamp = max(now, last) if conv["n"] > 0 and last is not None else now
                seqs = t.append([_new(m) for m in fresh], stamp)
                if last_turn_status is not None:
                    conv["lts"] = last_turn_status
                if title is not None:
                    conv["title"] = title
                if expires_at is not None:
                    conv["expires"] = to_us(expires_at)
                conv["updated"] = max(conv["updated"], now)
                self.put_head(kdir, new)
                self._drop(kdir, t.obsolete)
            created = from_us(stamp)
            return [
                StoredMessage(
                    id=m.message.id,
                    role=m.message.role,
                    content=json.loads(m.content_json),
                    metadata=json.loads(m.metadata_json),
                    compaction=m.message.compaction,
                    seq=seq,
                    created_at=created,
                )
                for m, seq in zip(fresh, seqs, strict=True)
            ]

    def _drop(self, kdir: str, names: list[str]) -> None:
        """Remove files a committed header no longer names (best effort)."""
        removed = False
        for name in names:
            with suppress(OSError):
                removed = self.io.unlink(os.path.join(kdir, name)) or removed
        if removed:
            with suppress(OSError):
                self.io.sync_dir(kdir)

    def _touch(self, kdir: str, h: Head, epoch: int | None, now: int) -> None:
        if epoch is not None and epoch > h["fence"]:
            h["fence"] = epoch
        h["conv"]["updated"] = max(h["conv"]["updated"], now)
        self.put_head(kdir, h)

    def set_last_turn_status(
        self, key: ConversationKey, principal: str, status_value: str, epoch: int | None
    ) -> None:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return
            now = self.now_us()
            h, status = self.head(kdir, key, now)
            if status != LIVE or h is None or h["conv"] is None:
                return
            self.check_write(key, h, status, principal, epoch)
            h["conv"]["lts"] = status_value
            self._touch(kdir, h, epoch, now)

    def set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                raise NotFoundError("no such conversation", key=key)
            now = self.now_us()
            h, _ = self._owned(kdir, key, principal, epoch, now)
            h["conv"]["title"] = title
            self._touch(kdir, h, epoch, now)

    def set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                raise NotFoundError("no such conversation", key=key)
            h, _ = self._owned(kdir, key, principal, None, self.now_us())
            members = set(h["shared"])
            before = set(members)
            if shared:
                members.add(with_principal)
            else:
                members.discard(with_principal)
            if members != before:
                h["shared"] = sorted(members)
                self.put_head(kdir, h)

    def truncate(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> int:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                raise NotFoundError("no such conversation", key=key)
            now = self.now_us()
            h, _ = self._owned(kdir, key, principal, epoch, now)
            with Transcript(self.io, kdir, h["conv"], write=True) as t:
                target = t.find(message_id)
                if target is None:
                    raise NotFoundError(f"no message {message_id!r} in this conversation", key=key)
                keep = target.seq if target.role == "user" else target.seq + 1
                removed = t.cut(keep)
            self._touch(kdir, h, epoch, now)
            return removed

    def branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        kdir = self.key_dir(key)
        ndir = self.key_dir(new_key)
        with ExitStack() as stack:
            # Both locks, always in digest order, so two branches cannot deadlock.
            for d in sorted((kdir, ndir)):
                held = stack.enter_context(self.locked(d, exclusive=d == ndir, create=d == ndir))
                if not held:
                    raise NotFoundError("no such conversation", key=key)
            now = self.now_us()
            h, status = self.head(kdir, key, now)
            if not self.visible(h, status, principal) or h is None or h["conv"] is None:
                raise NotFoundError("no such conversation", key=key)
            source = stack.enter_context(Transcript(self.io, kdir, h["conv"], write=False))
            target = source.find(message_id)
            if target is None:
                raise NotFoundError(f"no message {message_id!r} in this conversation", key=key)
            nh, nstatus = self.head(ndir, new_key, now)
            if nstatus in (LIVE, ERASED):
                raise ConflictError("the branch's key is already in use", key=new_key)
            new = self.claim(ndir, new_key, nh, nstatus, principal)
            self._new_conversation(ndir, new_key, new, now)
            conv = new["conv"]
            conv["title"] = h["conv"]["title"]
            copy = stack.enter_context(Transcript(self.io, ndir, conv, write=True))
            for lo in range(0, target.seq + 1, COPY_CHUNK):
                entries = source.entries(lo, min(target.seq + 1, lo + COPY_CHUNK))
                chunk = [
                    NewMessage(
                        id=uuid.uuid4().hex,
                        role=e.role,
                        compaction=e.compaction,
                        content_json=_reencode(r["c"]),
                        metadata_json=_reencode(r["m"]),
                    )
                    for e, r in zip(entries, source.records(entries), strict=True)
                ]
                copy.append(chunk, now)
            self.put_head(ndir, new)
            self._drop(ndir, copy.obsolete)

    def _matches(self, key: ConversationKey, h: Head, rule: SweepRule, now: int) -> bool:
        conv = h["conv"]
        if isinstance(rule, Expired):
            return conv["expires"] is not None and conv["expires"] <= now
        if isinstance(rule, IdleFor):
            return bool(conv["updated"] < now - rule.duration // US)
        assert isinstance(rule, OverCap)
        mine = (conv["updated"], key.session_id)
        newer = sum(
            1
            for other, oh in self._owned_by(key.tenant, h["owner"], now)
            if other != key and (oh["conv"]["updated"], other.session_id) > mine
        )
        return newer >= rule.keep

    def erase(self, key: ConversationKey, principal: str | None, rule: SweepRule | None) -> bool:
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            now = self.now_us()
            h, status = self.head(kdir, key, now)
            if status != LIVE or h is None:
                return False
            if principal is not None and h["owner"] != principal:
                raise NotOwnedError("only the owner may delete a conversation", key=key)
            if rule is not None and (h["conv"] is None or not self._matches(key, h, rule, now)):
                return False
            tomb = {
                "kc": _key_check(key),
                "erased_until": now + self.tombstone_ttl // US,
                "fence": h["fence"],
            }
            self.put_head(kdir, tomb)
            self.purge(kdir)
            if self.io.unlink(os.path.join(self.owner_dir(key.tenant, h["owner"]), key.digest)):
                self.io.sync_dir(self.owner_dir(key.tenant, h["owner"]))
            return True

    # --- conversations: reads ------------------------------------------------------

    @contextmanager
    def _reading(self, key: ConversationKey, principal: str) -> Iterator[Transcript | None]:
        """The visible transcript under the key's shared lock, or None."""
        kdir = self.key_dir(key)
        with self.locked(kdir, exclusive=False, create=False) as exists:
            if not exists:
                yield None
                return
            h, status = self.head(kdir, key, self.now_us())
            if not self.visible(h, status, principal) or h is None or h["conv"] is None:
                yield None
                return
            with Transcript(self.io, kdir, h["conv"], write=False) as t:
                yield t

    @staticmethod
    def _stored(t: Transcript, seqs: list[int]) -> list[StoredMessage]:
        entries = t.entries_at(seqs)
        return [
            StoredMessage(
                id=r["i"],
                role=e.role,  # type: ignore[arg-type]
                content=r["c"],
                metadata=r["m"],
                compaction=e.compaction,
                seq=e.seq,
                created_at=from_us(e.created),
            )
            for e, r in zip(entries, t.records(entries), strict=True)
        ]

    def get_transcript(
        self, key: ConversationKey, principal: str, query: Query
    ) -> list[TranscriptMessage]:
        with self._reading(key, principal) as t:
            if t is None:
                return []
            speaker = query.speaker
            size = t.count if speaker == "all" else t.kind_count(speaker)
            if query.index is not None:
                i = query.index + size if query.index < 0 else query.index
                if not 0 <= i < size:
                    return []
                lo, hi = i, i + 1
            elif query.time_range is not None:
                start, end = (to_us(v) for v in query.time_range)
                if start > end:
                    return []
                first = t.lower_bound(start)
                after = t.lower_bound(end, inclusive=False)
                if speaker == "all":
                    lo, hi = first, after
                else:
                    lo, hi = t.rank(speaker, first), t.rank(speaker, after)
            else:
                lo, hi = 0, size
            if query.limit is not None:
                hi = min(hi, lo + query.limit)
            if lo >= hi:
                return []
            seqs = list(range(lo, hi)) if speaker == "all" else t.positions(speaker, lo, hi)
            entries: list[Entry] = t.entries_at(seqs)
            return [
                TranscriptMessage(
                    index=lo + n,
                    role=e.role,  # type: ignore[arg-type]
                    content=r["c"],
                    id=r["i"],
                    created_at=from_us(e.created),
                )
                for n, (e, r) in enumerate(zip(entries, t.records(entries), strict=True))
            ]

    def recent(self, key: ConversationKey, principal: str, limit: int) -> list[StoredMessage]:
        with self._reading(key, principal) as t:
            if t is None:
                return []
            seqs: list[int] = []
            for kind in ("user", "assistant"):
                total = t.kind_count(kind)
                seqs.extend(t.positions(kind, max(0, total - limit), total))
            return self._stored(t, sorted(seqs)[-limit:])

    def history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        with self._reading(key, principal) as t:
            if t is None:
                return []
            compactions = t.kind_count("compaction")
            start = t.positions("compaction", compactions - 1, compactions)[0] if compactions else 0
            return self._stored(t, list(range(start, t.count)))

    def read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        with self._reading(key, principal) as t:
            if t is None:
                return []
            end = t.count if limit is None else min(t.count, start + limit)
            return self._stored(t, list(range(start, end)))

    @staticmethod
    def _info(key: ConversationKey, h: Head) -> ConversationInfo:
        conv = h["conv"]
        return ConversationInfo(
            key=key,
            owner=h["owner"],
            title=conv["title"],
            created_at=from_us(conv["created"]),
            updated_at=from_us(conv["updated"]),
            expires_at=None if conv["expires"] is None else from_us(conv["expires"]),
            last_turn_status=conv["lts"],
            tail_message_id=conv["tail"],
            message_count=conv["n"],
            shared_with=frozenset(h["shared"]),
        )

    def get_conversation(self, key: ConversationKey, principal: str) -> ConversationInfo | None:
        kdir = self.key_dir(key)
        h, status = self.head(kdir, key, self.now_us())
        if not self.visible(h, status, principal) or h is None or h["conv"] is None:
            return None
        return self._info(key, h)

    def _owned_by(self, tenant: str, owner: str, now: int) -> list[tuple[ConversationKey, Head]]:
        """Live conversations of ``owner`` in ``tenant``: the listing entries, each
        confirmed by its header (entries a crash left behind are skipped)."""
        found = []
        for digest in self.io.listdir(self.owner_dir(tenant, owner)):
            if len(digest) != 64:
                continue
            h = self.load_head(self.key_dir_of_digest(digest))
            if h is None or h.get("erased_until") is not None or h.get("conv") is None:
                continue
            key = ConversationKey.from_storage_name(h["key"])
            if key.tenant == tenant and h["owner"] == owner:
                found.append((key, h))
        return found

    def list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        after = _decode_cursor(cursor) if cursor is not None else None
        mine = sorted(
            (
                ((h["conv"]["updated"], key.session_id), key, h)
                for key, h in self._owned_by(tenant, principal, self.now_us())
            ),
            key=lambda item: item[0],
            reverse=True,
        )
        if after is not None:
            mine = [item for item in mine if item[0] < after]
        page = mine[:limit]
        next_cursor = _encode_cursor(*page[-1][0]) if len(mine) > limit and page else None
        return Page([self._info(key, h) for _, key, h in page], next_cursor)

    def find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        """Scans every key's header: O(conversations in the store)."""
        now = self.now_us()
        live: list[tuple[ConversationKey, Head]] = []
        for shard in sorted(self.io.listdir(self.keys_root)):
            for digest in sorted(self.io.listdir(os.path.join(self.keys_root, shard))):
                h = self.load_head(self.key_dir_of_digest(digest))
                if h is not None and h.get("erased_until") is None and h.get("conv") is not None:
                    live.append((ConversationKey.from_storage_name(h["key"]), h))
        live.sort(key=lambda kh: (kh[1]["conv"]["updated"], kh[0].session_id))
        if isinstance(rule, OverCap):
            groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
            for key, h in live:
                groups.setdefault((key.tenant, h["owner"]), []).append(
                    (h["conv"]["updated"], key.session_id)
                )
            keep: set[tuple[str, str, int, str]] = set()
            for (tenant, owner), items in groups.items():
                for updated, sid in sorted(items, reverse=True)[: rule.keep]:
                    keep.add((tenant, owner, updated, sid))
            found = [
                key
                for key, h in live
                if (key.tenant, h["owner"], h["conv"]["updated"], key.session_id) not in keep
            ]
        else:
            found = [key for key, h in live if self._matches(key, h, rule, now)]
        return found[:limit]

    # --- OAuth ---------------------------------------------------------------------

    def _user_dir(self, tenant: str, user: str) -> tuple[str, str]:
        u = _sha(tenant, user)
        return u, os.path.join(self.oauth_root, "u", u[:2], u)

    def _client_dir(self, tenant: str) -> str:
        t = _sha(tenant)
        return os.path.join(self.oauth_root, "c", t[:2], t)

    def _pending_dir(self, state: str) -> str:
        p = hashlib.sha256(state.encode()).hexdigest()
        return os.path.join(self.oauth_root, "pending", p[:2], p)

    @staticmethod
    def _record_name(server_name: str) -> str:
        return _sha(server_name) + ".rec"

    def _read_integration(
        self, path: str, tenant: str, user: str, server: str | None
    ) -> UserIntegration | None:
        raw = self.io.read_file(path)
        if raw is None:
            return None
        data = _loads(raw, path)
        if (
            data["tenant"] != tenant
            or data["user"] != user
            or (server is not None and data["server"] != server)
        ):
            raise ConflictError("two OAuth records share a storage digest; refusing to mix them")
        pending = data["pending"]
        return UserIntegration(
            tenant=data["tenant"],
            user=data["user"],
            server_name=data["server"],
            pending=None
            if pending is None
            else PendingAuthorization(
                state=pending["state"],
                auth_url=pending["auth_url"],
                code_verifier=pending["code_verifier"],
                token_endpoint=pending["token_endpoint"],
                redirect_uri=pending["redirect_uri"],
                expires_at=datetime.fromisoformat(pending["expires_at"]),
                resource=pending["resource"],
            ),
            tokens=data["tokens"],
        )

    def oauth_list_users(
        self, tenant: str, user: str, names: list[str] | None
    ) -> list[UserIntegration]:
        _, udir = self._user_dir(tenant, user)
        if names is None:
            files = [n for n in self.io.listdir(udir) if n.endswith(".rec")]
            wanted: list[tuple[str, str | None]] = [(n, None) for n in files]
        else:
            wanted = [(self._record_name(n), n) for n in dict.fromkeys(names)]
        found = []
        for name, server in wanted:
            record = self._read_integration(os.path.join(udir, name), tenant, user, server)
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: r.server_name)

    def oauth_get_user(self, tenant: str, user: str, server: str) -> UserIntegration | None:
        _, udir = self._user_dir(tenant, user)
        return self._read_integration(
            os.path.join(udir, self._record_name(server)), tenant, user, server
        )

    def oauth_find_pending(self, state: str) -> UserIntegration | None:
        for entry in sorted(self.io.listdir(self._pending_dir(state))):
            u, _, s = entry.partition(".")
            if len(u) != 64 or len(s) != 64:
                continue
            path = os.path.join(self.oauth_root, "u", u[:2], u, s + ".rec")
            raw = self.io.read_file(path)
            if raw is None:
                continue
            data = _loads(raw, path)
            if data["pending"] is not None and data["pending"]["state"] == state:
                return self._read_integration(path, data["tenant"], data["user"], data["server"])
        return None

    def oauth_save_user(self, record: UserIntegration) -> None:
        u, udir = self._user_dir(record.tenant, record.user)
        name = self._record_name(record.server_name)
        path = os.path.join(udir, name)
        with self.locked(udir, exclusive=True, create=True):
            old = self._read_integration(path, record.tenant, record.user, record.server_name)
            pending = record.pending
            if pending is not None:
                # The index entry exists before the record that it points to.
                pdir = self._pending_dir(pending.state)
                self.io.ensure_dir(pdir)
                self.io.create_empty(os.path.join(pdir, f"{u}.{name[:-4]}"))
            body = {
                "tenant": record.tenant,
                "user": record.user,
                "server": record.server_name,
                "pending": None
                if pending is None
                else {
                    "state": pending.state,
                    "auth_url": pending.auth_url,
                    "code_verifier": pending.code_verifier,
                    "token_endpoint": pending.token_endpoint,
                    "redirect_uri": pending.redirect_uri,
                    "expires_at": pending.expires_at.isoformat(),
                    "resource": pending.resource,
                },
                "tokens": None if record.tokens is None else dict(record.tokens),
            }
            self.io.replace_file(path, _reencode(body))
            if (
                old is not None
                and old.pending is not None
                and (pending is None or pending.state != old.pending.state)
            ):
                self._unindex(old.pending.state, u, name)

    def _unindex(self, state: str, u: str, name: str) -> None:
        pdir = self._pending_dir(state)
        if self.io.unlink(os.path.join(pdir, f"{u}.{name[:-4]}")):
            self.io.sync_dir(pdir)

    def oauth_delete_user(self, tenant: str, user: str, server: str) -> bool:
        u, udir = self._user_dir(tenant, user)
        name = self._record_name(server)
        path = os.path.join(udir, name)
        with self.locked(udir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            old = self._read_integration(path, tenant, user, server)
            if old is None:
                return False
            self.io.unlink(path)
            self.io.sync_dir(udir)
            if old.pending is not None:
                self._unindex(old.pending.state, u, name)
            return True

    def _read_client(self, path: str, tenant: str, server: str | None) -> ClientInfo | None:
        raw = self.io.read_file(path)
        if raw is None:
            return None
        data = _loads(raw, path)
        if data["tenant"] != tenant or (server is not None and data["server"] != server):
            raise ConflictError("two OAuth records share a storage digest; refusing to mix them")
        return ClientInfo(
            tenant=data["tenant"], server_name=data["server"], client_info=data["info"]
        )

    def oauth_list_clients(self, tenant: str, names: list[str] | None) -> list[ClientInfo]:
        cdir = self._client_dir(tenant)
        if names is None:
            wanted: list[tuple[str, str | None]] = [
                (n, None) for n in self.io.listdir(cdir) if n.endswith(".rec")
            ]
        else:
            wanted = [(self._record_name(n), n) for n in dict.fromkeys(names)]
        found = []
        for name, server in wanted:
            record = self._read_client(os.path.join(cdir, name), tenant, server)
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: r.server_name)

    def oauth_get_client(self, tenant: str, server: str) -> ClientInfo | None:
        return self._read_client(
            os.path.join(self._client_dir(tenant), self._record_name(server)), tenant, server
        )

    def oauth_save_client(self, record: ClientInfo) -> None:
        cdir = self._client_dir(record.tenant)
        with self.locked(cdir, exclusive=True, create=True):
            body = {
                "tenant": record.tenant,
                "server": record.server_name,
                "info": dict(record.client_info),
            }
            self.io.replace_file(
                os.path.join(cdir, self._record_name(record.server_name)), _reencode(body)
            )


def _new(m: EncodedMessage) -> NewMessage:
    return NewMessage(
        id=m.message.id,
        role=m.message.role,
        compaction=m.message.compaction,
        content_json=m.content_json,
        metadata_json=m.metadata_json,
    )


def _encode_cursor(updated: int, session_id: str) -> str:
    return base64.urlsafe_b64encode(_dumps([updated, session_id])).decode()


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        updated, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not isinstance(updated, int) or not isinstance(session_id, str):
            raise ValueError(cursor)
        return updated, session_id
    except Exception as exc:
        raise UsageError("cursor is not one this store produced") from exc


__all__ = ["Engine", "from_us", "to_us"]
