"""One conversation's transcript on disk: append-only files committed by the key header.

Files in the key directory (all written only under the key's exclusive lock):

- ``msgs.dat``: the message records, one JSON object each (``{"i": id, "c": content,
  "m": metadata}``), back to back.
- ``msgs.idx``: one fixed-width :data:`IDX` entry per message (data offset and length,
  id hash, ``created_at``, role, compaction flag, and how many user / assistant /
  compaction messages precede it). Entry ``seq`` lives at ``seq * IDX.size``.
- ``user.idx``, ``assistant.idx``, ``compaction.idx``: the ``seq`` of each message of that
  kind, 8 bytes each, so the ``i``-th user message is one read away.
- ``ids-<gen>.tbl``: an open-addressing hash table ``id hash -> seq`` for the idempotent
  append check, verified against ``msgs.idx`` (and the record) on every hit.

The header's ``conv`` field (replaced atomically) holds the committed count, the data
end and the per-kind counts. Anything past them is garbage from a crash and is
overwritten by the next append, so a crash at any step leaves the old transcript.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentstores.errors import BackendUnavailableError

from .fsio import FileIO, open_private

IDX = struct.Struct("<QQqIIIIBB6x")
"""offset, id hash, created_at (us), length, user rank, assistant rank, compaction rank,
role code, flags."""
POS = struct.Struct("<Q")
SLOT = struct.Struct("<QQ")
"""id hash, seq + 1 (0 = empty slot)."""

ROLES = ("user", "assistant", "tool", "system", "other")
ROLE_CODE = {role: code for code, role in enumerate(ROLES)}
KINDS = ("user", "assistant", "compaction")
DATA = "msgs.dat"
INDEX = "msgs.idx"
TRANSCRIPT_FILES = (DATA, INDEX, "user.idx", "assistant.idx", "compaction.idx")
TABLE_MIN = 64
PROBE_CHUNK = 16
READ_CHUNK = 8 << 20


def id_hash(message_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(message_id.encode(), digest_size=8).digest(), "little")


def table_name(gen: str) -> str:
    return f"ids-{gen}.tbl"


def new_meta(now: int) -> dict[str, Any]:
    """The header's ``conv`` field for a new, empty conversation."""
    return {
        "n": 0,
        "end": 0,
        "nu": 0,
        "na": 0,
        "nc": 0,
        "tail": None,
        "last": None,
        "created": now,
        "updated": now,
        "title": None,
        "expires": None,
        "lts": None,
        "md": {},
        "tbl": None,
    }


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    offset: int
    idhash: int
    created: int
    length: int
    urank: int
    arank: int
    crank: int
    role: str
    compaction: bool


@dataclass(frozen=True, slots=True)
class NewMessage:
    """What ``Transcript.append`` writes: encoded parts of one message."""

    id: str
    role: str
    compaction: bool
    content_json: bytes
    metadata_json: bytes


def record_bytes(m: NewMessage) -> bytes:
    ident = json.dumps(m.id, ensure_ascii=False).encode()
    return b'{"i":' + ident + b',"c":' + m.content_json + b',"m":' + m.metadata_json + b"}"


def _not_json(constant: str) -> Any:
    """``NaN`` and the infinities: Python reads them, JSON has none, and no write of this
    store makes one; a record holding one is damaged."""
    raise ValueError(f"{constant} is not JSON")


def corrupt(what: str) -> BackendUnavailableError:
    return BackendUnavailableError(f"file store is corrupt: {what}")


class Transcript:
    """Open files of one transcript. Readers hold the key's shared lock, writers its
    exclusive lock; ``meta`` is the header's ``conv`` dict (writers update it in place,
    then commit the header)."""

    def __init__(self, io: FileIO, kdir: str, meta: dict[str, Any], *, write: bool) -> None:
        self.io = io
        self.kdir = kdir
        self.meta = meta
        self.write = write
        self._fds: dict[str, int] = {}
        self.obsolete: list[str] = []
        """Files to remove once the header that stops naming them is committed."""

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is None:
            path = os.path.join(self.kdir, name)
            if self.write:
                fd = open_private(path, os.O_RDWR)
            else:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:
                    raise corrupt(f"{name} is missing under {self.kdir}") from None
            self._fds[name] = fd
        return fd

    # --- reading -----------------------------------------------------------------

    @property
    def count(self) -> int:
        return int(self.meta["n"])

    def kind_count(self, kind: str) -> int:
        return int(self.meta[{"user": "nu", "assistant": "na", "compaction": "nc"}[kind]])

    def _unpack(self, seq: int, raw: bytes) -> Entry:
        off, h, created, length, ur, ar, cr, role, flags = IDX.unpack(raw)
        if role >= len(ROLES):
            raise corrupt(f"bad role code in {INDEX} at {seq}")
        return Entry(seq, off, h, created, length, ur, ar, cr, ROLES[role], bool(flags & 1))

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Index entries ``lo .. hi-1`` (committed ones only), in one read per 8 MiB."""
        hi = min(hi, self.count)
        out: list[Entry] = []
        step = max(1, READ_CHUNK // IDX.size)
        for start in range(lo, hi, step):
            stop = min(hi, start + step)
            raw = self.io.pread(self.fd(INDEX), (stop - start) * IDX.size, start * IDX.size)
            if len(raw) != (stop - start) * IDX.size:
                raise corrupt(f"{INDEX} is shorter than the committed count")
            for i in range(stop - start):
                out.append(self._unpack(start + i, raw[i * IDX.size : (i + 1) * IDX.size]))
        return out

    def entry(self, seq: int) -> Entry:
        found = self.entries(seq, seq + 1)
        if not found:
            raise corrupt(f"no entry {seq} in {INDEX}")
        return found[0]

    def entries_at(self, seqs: Sequence[int]) -> list[Entry]:
        """Entries for ascending ``seqs``, one read per run of consecutive seqs."""
        out: list[Entry] = []
        i = 0
        while i < len(seqs):
            j = i + 1
            while j < len(seqs) and seqs[j] == seqs[j - 1] + 1:
                j += 1
            out.extend(self.entries(seqs[i], seqs[j - 1] + 1))
            i = j
        return out

    def positions(self, kind: str, lo: int, hi: int) -> list[int]:
        """The seqs of the ``lo .. hi-1``-th messages of ``kind``."""
        hi = min(hi, self.kind_count(kind))
        if lo >= hi:
            return []
        raw = self.io.pread(self.fd(f"{kind}.idx"), (hi - lo) * POS.size, lo * POS.size)
        if len(raw) != (hi - lo) * POS.size:
            raise corrupt(f"{kind}.idx is shorter than its committed count")
        return [v for (v,) in POS.iter_unpack(raw)]

    def records(self, entries: Sequence[Entry]) -> list[dict[str, Any]]:
        """The decoded records of ``entries``, one read per contiguous run."""
        out: list[dict[str, Any]] = []
        i = 0
        while i < len(entries):
            j = i + 1
            size = entries[i].length
            while (
                j < len(entries)
                and entries[j].offset == entries[j - 1].offset + entries[j - 1].length
                and size + entries[j].length <= READ_CHUNK
            ):
                size += entries[j].length
                j += 1
            base = entries[i].offset
            raw = self.io.pread(self.fd(DATA), size, base)
            if len(raw) != size:
                raise corrupt(f"{DATA} is shorter than its index says")
            for e in entries[i:j]:
                try:
                    record = raw[e.offset - base : e.offset - base + e.length]
                    out.append(json.loads(record, parse_constant=_not_json))
                except ValueError:
                    raise corrupt(f"record {e.seq} in {DATA} does not parse") from None
            i = j
        return out

    def lower_bound(self, created: int, *, inclusive: bool = True) -> int:
        """First seq whose ``created_at`` is >= ``created`` (> when not inclusive)."""
        lo, hi = 0, self.count
        while lo < hi:
            mid = (lo + hi) // 2
            value = self.entry(mid).created
            if value < created or (not inclusive and value == created):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def rank(self, speaker: str, seq: int) -> int:
        """How many messages of ``speaker`` (``user`` or ``assistant``: the reads by
        speaker are the only callers) come before ``seq``."""
        if seq >= self.count:
            return self.kind_count(speaker)
        e = self.entry(seq)
        return e.urank if speaker == "user" else e.arank

    # --- the id table ------------------------------------------------------------

    def _table(self) -> tuple[int, int]:
        tbl = self.meta["tbl"]
        if tbl is None:
            raise corrupt("transcript has no id table")
        return self.fd(table_name(tbl["g"])), int(tbl["c"])

    def _slots(self, h: int) -> Iterable[tuple[int, int, int]]:
        """``(slot, hash, seq + 1)`` along ``h``'s probe sequence, once round the table."""
        fd, cap = self._table()
        i = h & (cap - 1)
        seen = 0
        while seen < cap:
            chunk = min(PROBE_CHUNK, cap - i, cap - seen)
            raw = self.io.pread(fd, chunk * SLOT.size, i * SLOT.size)
            raw = raw.ljust(chunk * SLOT.size, b"\0")
            for k, (slot_hash, seq1) in enumerate(SLOT.iter_unpack(raw)):
                yield i + k, slot_hash, seq1
            seen += chunk
            i = (i + chunk) % cap

    def _live(self, slot_hash: int, seq1: int, count: int) -> Entry | None:
        """The entry a slot points to if the slot is not stale (crash or truncate)."""
        seq = seq1 - 1
        if seq >= count:
            return None
        e = self.entry(seq) if seq < self.count else self._pending_entry(seq)
        return e if e.idhash == slot_hash else None

    def _pending_entry(self, seq: int) -> Entry:
        raw = self.io.pread(self.fd(INDEX), IDX.size, seq * IDX.size)
        return self._unpack(seq, raw)

    def find(self, message_id: str) -> Entry | None:
        """The committed entry of ``message_id``, or None."""
        if self.count == 0:
            return None
        h = id_hash(message_id)
        for _, slot_hash, seq1 in self._slots(h):
            if seq1 == 0:
                return None
            if slot_hash != h:
                continue
            e = self._live(slot_hash, seq1, self.count)
            if e is not None and self.records([e])[0].get("i") == message_id:
                return e
        return None

    def _insert(self, h: int, seq: int, count: int) -> bool:
        """Point a slot at ``seq``: an empty one, or a stale one holding ``h``. A slot
        that already points at ``seq`` for ``h`` (left by a truncation, now that the same
        id is appended at the same position again) is kept as it is."""
        fd, _ = self._table()
        for slot, slot_hash, seq1 in self._slots(h):
            if seq1 == seq + 1 and slot_hash == h:
                return True
            reuse = seq1 != 0 and slot_hash == h and self._live(slot_hash, seq1, count) is None
            if seq1 == 0 or reuse:
                self.io.pwrite(fd, SLOT.pack(h, seq + 1), slot * SLOT.size)
                if seq1 == 0:
                    self.meta["tbl"]["u"] += 1
                return True
        return False

    def new_table(self, capacity: int, hashes: Iterable[tuple[int, int]] = ()) -> None:
        """Write a fresh table file holding ``(hash, seq)`` pairs; the header names it."""
        capacity = max(TABLE_MIN, capacity)
        table = bytearray(capacity * SLOT.size)
        used = 0
        for h, seq in hashes:
            i = h & (capacity - 1)
            while SLOT.unpack_from(table, i * SLOT.size)[1] != 0:
                i = (i + 1) % capacity
            SLOT.pack_into(table, i * SLOT.size, h, seq + 1)
            used += 1
        gen = secrets.token_hex(8)
        name = table_name(gen)
        fd = open_private(os.path.join(self.kdir, name), os.O_RDWR | os.O_TRUNC)
        self._fds[name] = fd
        self.io.pwrite(fd, table, 0)
        self.io.sync(fd)
        self.obsolete.extend(
            other
            for other in self.io.listdir(self.kdir)
            if other.startswith("ids-") and other.endswith(".tbl") and other != name
        )
        self.meta["tbl"] = {"g": gen, "c": capacity, "u": used}

    def _grow(self, adding: int) -> None:
        tbl = self.meta["tbl"]
        if tbl is not None and tbl["u"] + adding <= tbl["c"] // 2:
            return
        want = 3 * (self.count + adding)
        capacity = TABLE_MIN
        while capacity < want:
            capacity *= 2
        self.new_table(capacity, ((e.idhash, e.seq) for e in self.entries(0, self.count)))

    # --- writing -----------------------------------------------------------------

    def append(self, messages: Sequence[NewMessage], stamp: int) -> list[int]:
        """Write ``messages`` after the committed ones (durably); update ``meta``.

        Nothing is visible until the caller commits the header holding ``meta``.
        """
        meta = self.meta
        if not messages:
            return []
        n, end = int(meta["n"]), int(meta["end"])
        counts = {
            "user": int(meta["nu"]),
            "assistant": int(meta["na"]),
            "compaction": int(meta["nc"]),
        }
        start_counts = dict(counts)
        idx = bytearray()
        positions: dict[str, bytearray] = {kind: bytearray() for kind in KINDS}
        hashes: list[tuple[int, int]] = []
        data_fd = self.fd(DATA)
        pending = bytearray()
        offset = end
        seqs: list[int] = []
        for i, m in enumerate(messages):
            seq = n + i
            rec = record_bytes(m)
            h = id_hash(m.id)
            idx += IDX.pack(
                offset + len(pending),
                h,
                stamp,
                len(rec),
                counts["user"],
                counts["assistant"],
                counts["compaction"],
                ROLE_CODE[m.role],
                1 if m.compaction else 0,
            )
            pending += rec
            if len(pending) >= READ_CHUNK:
                self.io.pwrite(data_fd, pending, offset)
                offset += len(pending)
                pending = bytearray()
            for kind, hit in (
                ("user", m.role == "user"),
                ("assistant", m.role == "assistant"),
                ("compaction", m.compaction),
            ):
                if hit:
                    positions[kind] += POS.pack(seq)
                    counts[kind] += 1
            hashes.append((h, seq))
            seqs.append(seq)
        if pending:
            self.io.pwrite(data_fd, pending, offset)
            offset += len(pending)
        touched = [data_fd]
        if idx:
            self.io.pwrite(self.fd(INDEX), idx, n * IDX.size)
            touched.append(self.fd(INDEX))
        for kind in KINDS:
            if positions[kind]:
                fd = self.fd(f"{kind}.idx")
                self.io.pwrite(fd, positions[kind], start_counts[kind] * POS.size)
                touched.append(fd)
        self._grow(len(messages))
        total = n + len(messages)
        for h, seq in hashes:
            if not self._insert(h, seq, total):
                self.new_table(
                    self.meta["tbl"]["c"] * 2,
                    [(e.idhash, e.seq) for e in self.entries(0, n)] + hashes[: seq - n],
                )
                if not self._insert(h, seq, total):
                    raise corrupt("id table is full after a rebuild")
        touched.append(self._table()[0])
        for fd in dict.fromkeys(touched):
            self.io.sync(fd)
        meta.update(
            n=total,
            end=offset,
            nu=counts["user"],
            na=counts["assistant"],
            nc=counts["compaction"],
        )
        meta["tail"] = messages[-1].id
        meta["last"] = stamp
        return seqs

    def cut(self, keep: int) -> int:
        """Drop every message from ``keep`` on (in ``meta`` only); returns how many."""
        n = self.count
        if keep >= n:
            return 0
        first_dropped = self.entry(keep)
        if keep > 0:
            last_kept = self.entry(keep - 1)
            tail = self.records([last_kept])[0]["i"]
            last: int | None = last_kept.created
        else:
            tail, last = None, None
        self.meta.update(
            n=keep,
            end=first_dropped.offset,
            nu=first_dropped.urank,
            na=first_dropped.arank,
            nc=first_dropped.crank,
            tail=tail,
            last=last,
        )
        return n - keep


def transcript_files(names: Iterable[str]) -> list[str]:
    """Which of ``names`` (a key directory listing) belong to a transcript."""
    return [
        n for n in names if n in TRANSCRIPT_FILES or (n.startswith("ids-") and n.endswith(".tbl"))
    ]


__all__ = [
    "IDX",
    "TRANSCRIPT_FILES",
    "Entry",
    "NewMessage",
    "Transcript",
    "id_hash",
    "new_meta",
    "record_bytes",
    "transcript_files",
]
