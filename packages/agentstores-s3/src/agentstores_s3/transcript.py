"""A conversation's transcript on S3: message objects named by position, and a window
of the newest messages that the header itself holds.

The header's ``conv`` holds ``n`` (the count), ``segs`` (``[gen, start, end]`` runs: the
message at position ``q`` is the object ``m/<gen>/<q>`` of the run covering ``q``), and
``p``: the newest messages (the last append whole, and older ones while the window stays
within :data:`WINDOW` messages and :data:`WINDOW_BYTES`). An append commits by writing
the header alone, its new messages in ``p``; messages leaving the window are first
copied out to message and id objects (deterministic bodies: copying twice writes the
same bytes). So a message object is only written once its content is committed, and
never changes; a truncation starts a new ``gen`` for later appends, so a position is
never reused within a run. Reading position ``q`` is the header and at most one GET
computed from ``q``, whatever the length.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.models import StoredMessage
from agentstores.stores import kit

from .client import S3IO
from .header import Head, dumps, key_names, loads

Conv = dict[str, Any]

WINDOW = 32
"""Most messages the header holds (older ones live in message objects), but for rows an
append that found the header moved left in it (:func:`held_back`, at most as many again)."""
WINDOW_BYTES = 64 * 1024
"""Most encoded bytes of messages the header holds beyond the last append's own."""


def message_name(kdir: str, gen: str, seq: int) -> str:
    return f"{kdir}m/{gen}/{seq:016x}"


def id_name(kdir: str, gen: str, message_id: str) -> str:
    return f"{kdir}i/{gen}/{hashlib.sha256(message_id.encode()).hexdigest()}"


def new_conv(now: int, gen: str) -> Conv:
    return {
        "c": now,
        "u": now,
        "t": None,
        "x": None,
        "l": None,
        "n": 0,
        "tail": None,
        "last": 0,
        "segs": [],
        "gen": gen,
        "p": [],
        "md": {},
    }


def run_of(conv: Conv, seq: int) -> str:
    """The ``gen`` whose run covers position ``seq``."""
    for gen, start, end in conv["segs"]:
        if start <= seq < end:
            return str(gen)
    raise LookupError(seq)


def pending_start(conv: Conv) -> int:
    return int(conv["n"]) - len(conv["p"])


def appended_only(old: Conv, new: Conv) -> bool:
    """Whether ``new`` is ``old`` with appends only (same run, nothing cut), every message
    appended since still in ``new``'s window: then a message outside ``new``'s window was
    outside ``old``'s (its id object written before ``old`` was) or in ``old``'s window."""
    n_old, n_new = int(old["n"]), int(new["n"])
    if new["gen"] != old["gen"] or n_new < n_old or pending_start(new) > n_old:
        return False
    runs_old, runs_new = old["segs"], new["segs"]
    if len(runs_new) < len(runs_old):
        return False
    for i, (was, now) in enumerate(zip(runs_old, runs_new, strict=False)):
        if was[0] != now[0] or was[1] != now[1] or now[2] < was[2]:
            return False
        if i < len(runs_old) - 1 and now[2] != was[2]:
            return False
    return True


def to_stored(row: dict[str, Any]) -> StoredMessage:
    return StoredMessage(
        id=row["id"],
        role=row["r"],
        content=json.loads(row["c"]),
        metadata=json.loads(row["md"]),
        compaction=bool(row["k"]),
        seq=int(row["q"]),
        created_at=kit.from_micros(row["t"]),
    )


class Transcript:
    """Reads and copies of one key's transcript objects.

    ``known`` maps id object names to what reading them gave (None: absent), read
    together with a header of the very version a caller then decides on (see
    ``S3ConversationStore._prefetch``); :meth:`position` takes those instead of reading
    them again."""

    def __init__(self, io: S3IO, key: ConversationKey, known: dict[str, Any] | None = None) -> None:
        self.io = io
        self.kdir = key_names(key)[0]
        self.known: dict[str, Any] = {} if known is None else known

    def copies(self, conv: Conv, rows: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
        """The objects (name, body) that copy committed rows of the header's window out:
        a message object and an id object each; the same bytes however often."""
        out = []
        for row in rows:
            gen = run_of(conv, row["q"])
            out.append((message_name(self.kdir, gen, row["q"]), dumps(row)))
            out.append((id_name(self.kdir, gen, row["id"]), str(row["q"]).encode()))
        return out

    def id_checks(self, conv: Conv, message_id: str) -> list[str]:
        """The id objects :meth:`position` reads for ``message_id`` (one per run that
        holds messages outside the window; none when the window holds it)."""
        if any(row["id"] == message_id for row in conv["p"]):
            return []
        first = pending_start(conv)
        return [
            id_name(self.kdir, gen, message_id) for gen, start, _ in conv["segs"] if start < first
        ]

    def left_window(self, old: Conv, new: Conv) -> dict[str, tuple[bytes, str]]:
        """What the id objects of the rows of ``old``'s window that ``new``'s has left
        say (``new`` :func:`appended_only` from ``old``): their positions, known from
        ``old`` whether or not an id check sent before ``new`` was read saw the object."""
        first = pending_start(new)
        return {
            id_name(self.kdir, run_of(new, int(row["q"])), row["id"]): (str(row["q"]).encode(), "")
            for row in old["p"]
            if int(row["q"]) < first
        }

    def position(self, conv: Conv, message_id: str) -> int | None:
        """Where ``message_id`` is in the transcript, or None (one GET per run holding
        messages outside the window, unless ``known`` has it)."""
        for row in conv["p"]:
            if row["id"] == message_id:
                return int(row["q"])
        first = pending_start(conv)
        for gen, start, end in conv["segs"]:
            if start >= first:
                continue  # every message of this run is in the window
            name = id_name(self.kdir, gen, message_id)
            found = self.known[name] if name in self.known else self.io.get(name)
            if found is None:
                continue
            seq = int(found[0])
            if start <= seq < end and seq < first:
                return seq
        return None

    def row(self, conv: Conv, seq: int) -> dict[str, Any] | None:
        """The stored row at ``seq`` (None when its object is gone: erased meanwhile)."""
        first = pending_start(conv)
        if seq >= first:
            row: dict[str, Any] = conv["p"][seq - first]
            return row
        found = self.io.get(message_name(self.kdir, run_of(conv, seq), seq))
        if found is None:
            return None
        value: dict[str, Any] = loads(found[0], "a message object")
        return value

    def write_copy(self, gen: str, rows: list[dict[str, Any]]) -> None:
        """Write ``rows`` as objects of run ``gen`` (a branch, before its header)."""
        for row in rows:
            self.io.put(message_name(self.kdir, gen, row["q"]), dumps(row))
            self.io.put(id_name(self.kdir, gen, row["id"]), str(row["q"]).encode())


def split_window(
    kept: list[dict[str, Any]], new: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(leaving, window)``: which of the old window ``kept`` must leave the header so
    that it holds ``new`` whole and the newest of ``kept`` within the bounds."""
    room = max(0, WINDOW - len(new))
    size = 0
    stay = 0
    for row in reversed(kept):
        size += len(row["c"]) + len(row["md"]) + 64
        if stay >= room or size > WINDOW_BYTES:
            break
        stay += 1
    cut = len(kept) - stay
    return kept[:cut], kept[cut:] + new


def held_back(
    leaving: list[dict[str, Any]], window: list[dict[str, Any]], copied: set[int]
) -> list[dict[str, Any]]:
    """The rows of ``leaving`` (oldest first) that may stay in the header a while longer
    instead of being copied out now: from the first not in ``copied`` (positions) on,
    when the header then holds at most twice its bounds; else none. The next append
    copies them out, together with its header read."""
    uncopied = [i for i, row in enumerate(leaving) if int(row["q"]) not in copied]
    if not uncopied:
        return []
    held = leaving[uncopied[0] :]
    size = sum(len(row["c"]) + len(row["md"]) + 64 for row in held + window)
    if len(held) + len(window) > 2 * WINDOW or size > 2 * WINDOW_BYTES:
        return []
    return held


def head_conv(h: Head | None) -> Conv | None:
    if h is None:
        return None
    conv: Conv | None = h.get("conv")
    return conv


__all__ = [
    "Conv",
    "Transcript",
    "head_conv",
    "held_back",
    "id_name",
    "message_name",
    "new_conv",
    "pending_start",
    "run_of",
    "split_window",
    "to_stored",
]
