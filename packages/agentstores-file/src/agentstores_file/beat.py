"""The heartbeat file: a supervision row's same-epoch updates, overwritten in place.

A heartbeat changes the row's ``heartbeat_at`` (and at most its status and message id),
never the owner, the fence or the epoch. So it does not replace the header (temp file,
fsync, rename, directory fsync): it overwrites one of two fixed slots of the key's
``beat`` file and fdatasyncs it, one data write and one flush on a file whose blocks are
already allocated.

A claim creates the file blank (no slot written) alongside the header, so a row's
heartbeats go in place from the first; a row without the file (claimed by format 1)
gets it whole, by rename, on its first heartbeat. The header's row stays the base:
every write that changes the row's epoch (a claim, a takeover) or removes it goes
through the header by rename, as before, and gives the row a fresh random generation
``g``. A slot names the generation it was written for and counts only while the
header's row has that ``g``: a slot left from an earlier generation, or from before an
erasure, is never read again.

Slot layout (512 bytes, little-endian, slot ``i`` at offset ``512 * i``): magic
``ASB1``, CRC-32 of the other 504 bytes, sequence number (u64), generation (u64),
heartbeat micros (i64), status length (u16), message id length (u16), status and
message id in UTF-8, zero padding. A writer overwrites the slot that does not hold the
newest valid one, so a write cut at any byte (a crash, a power loss tearing the sector)
leaves the previous beat whole: a reader takes the newest slot whose magic, CRC and
generation hold, and sees the old beat or the new one, never a mix.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from agentstores.keys import MAX_ID_BYTES
from agentstores.models import SUPERVISION_STATUSES

from .transcript import corrupt

NAME = "beat"
SLOT = 512
"""One slot: a sector, so a disk that writes whole sectors never tears it either."""
SIZE = 2 * SLOT
MAGIC = b"ASB1"

_FIXED = struct.Struct("<QQqHH")  # seq, gen, heartbeat micros, status len, message id len
_SEQ = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_BODY = 8  # magic and CRC
_ROOM = SLOT - _BODY - _FIXED.size
_PAD = bytes(SLOT)
# Every row fits a slot: any status, and a message id of the most bytes an id may have.
assert max(len(s) for s in SUPERVISION_STATUSES) + MAX_ID_BYTES <= _ROOM


class Slot(NamedTuple):
    """One valid slot (``slot``: 0 or 1)."""

    slot: int
    seq: int
    gen: int
    hb: int
    status: str
    message_id: str


def encode(seq: int, gen: int, hb: int, status: str, message_id: str) -> bytes:
    """One slot's bytes."""
    s, m = status.encode(), message_id.encode()
    rest = _FIXED.pack(seq, gen, hb, len(s), len(m)) + s + m
    rest += _PAD[: SLOT - _BODY - len(rest)]
    return MAGIC + _CRC.pack(zlib.crc32(rest)) + rest


def _whole(raw: bytes, index: int) -> bytes | None:
    """The checked part of slot ``index`` of ``raw`` if whole (magic and CRC hold)."""
    at = index * SLOT
    if raw[at : at + 4] != MAGIC:
        return None
    rest = raw[at + _BODY : at + SLOT]
    if _CRC.unpack_from(raw, at + 4)[0] != zlib.crc32(rest):
        return None
    return rest


def _slot(raw: bytes, index: int) -> Slot | None:
    """Slot ``index`` of ``raw`` if whole, else None."""
    rest = _whole(raw, index)
    if rest is None:
        return None
    seq, gen, hb, ns, nm = _FIXED.unpack_from(rest)
    text = rest[_FIXED.size : _FIXED.size + ns + nm]
    return Slot(index, seq, gen, hb, text[:ns].decode(), text[ns:].decode())


def slots(raw: bytes, what: str) -> tuple[Slot | None, Slot | None]:
    """Both slots of a heartbeat file (None where torn or never written)."""
    if len(raw) != SIZE:
        raise corrupt(f"{what} is {len(raw)} bytes, not {SIZE}")
    return _slot(raw, 0), _slot(raw, 1)


def newest(raw: bytes, gen: int, what: str) -> Slot | None:
    """The newest valid slot written for generation ``gen``, or None."""
    best = None
    for found in slots(raw, what):
        if found is not None and found.gen == gen and (best is None or found.seq > best.seq):
            best = found
    return best


def next_write(raw: bytes, what: str) -> tuple[int, int]:
    """``(offset, seq)`` of the next write: the slot not holding the newest valid one,
    with a sequence number above both (only sequence numbers are decoded: this is on
    every heartbeat)."""
    if len(raw) != SIZE:
        raise corrupt(f"{what} is {len(raw)} bytes, not {SIZE}")
    seqs = []
    for index in (0, 1):
        rest = _whole(raw, index)
        seqs.append(-1 if rest is None else _SEQ.unpack_from(rest)[0])
    top = 0 if seqs[0] >= seqs[1] else 1
    if seqs[top] < 0:
        return 0, 1
    return (1 - top) * SLOT, seqs[top] + 1


BLANK = bytes(SIZE)
"""A heartbeat file with no slot written (what a claim creates)."""


def first_file(slot: bytes) -> bytes:
    """A new heartbeat file holding ``slot`` (sequence 1) in slot 0, slot 1 empty."""
    return slot + _PAD


__all__ = [
    "BLANK",
    "NAME",
    "SIZE",
    "SLOT",
    "Slot",
    "encode",
    "first_file",
    "newest",
    "next_write",
    "slots",
]
