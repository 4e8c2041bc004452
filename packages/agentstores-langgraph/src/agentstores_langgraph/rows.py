"""How a LangGraph thread is laid out in its conversation's append-only transcript log.

A thread's checkpoints are rows of the thread's own conversation (role ``other``,
``metadata["langgraph"]`` naming the kind), so everything the conversation promises -
owner-only writes, sharing, fencing, erasure with a tombstone - covers them with no new
store kind. Two kinds of row are written:

- ``checkpoint``: the checkpoint without its channel values, its metadata and parent,
  ``values`` (the values of the channels it changed, each with its version: a put is
  one row), ``locs`` (for every channel: the version and the ``seq`` of the row holding
  its value, this row's own for a changed channel), ``prev_max`` (the largest
  checkpoint id of any earlier row, so a newest-first scan knows when to stop) and
  ``heads``;
- ``write``: one pending write of one task, keyed by (checkpoint, task, index).

Threads written before checkpoints held their values also have ``blob`` rows (one
channel value written by one checkpoint), which ``locs`` point at; they are still read.

``own`` (on every checkpoint and write row) counts the checkpointer's rows up to and
including the row's batch; the conversation metadata :data:`OWN_ROWS` carries the
latest, merged in the same append.

``heads`` (on every checkpoint and write row) maps each namespace to the id and ``seq``
of its newest checkpoint, so the latest checkpoint is found from the tail in a bounded
number of reads whatever the thread's length. Message ids are digests of what makes a
row unique, which makes a retried put or put_writes a no-op (the log is idempotent by
message id).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentstores import Message, StoredMessage

KIND = "langgraph"
"""The metadata key that marks a row as the checkpointer's (its value is the kind)."""
OWN_ROWS = "langgraph.checkpoint_rows"
"""The conversation metadata name holding how many of its rows are the checkpointer's
(so its chat message count is ``message_count`` minus this, with no walk)."""


def row_id(*parts: str) -> str:
    """A fixed-length message id for the row identified by ``parts`` (injective in
    practice: SHA-256 over the NUL-joined parts, which never hold NUL)."""
    joined = "\x00".join(parts).encode("utf-8", "surrogatepass")
    return "lg" + hashlib.sha256(joined).hexdigest()[:48]


def pack(typed: tuple[str, bytes]) -> list[str]:
    """A serializer's ``(type, bytes)`` as JSON: ``[type, base64]``."""
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def unpack(packed: Any) -> tuple[str, bytes]:
    """Inverse of :func:`pack`."""
    return str(packed[0]), base64.b64decode(packed[1])


Heads = dict[str, list[Any]]
"""namespace -> [newest checkpoint id, its seq]."""


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """A decoded ``checkpoint`` row."""

    seq: int
    ns: str
    id: str
    parent: str | None
    checkpoint: list[str]
    metadata: list[str]
    locs: dict[str, list[Any]]
    prev_max: str | None
    heads: Heads
    values: dict[str, list[Any]]
    """channel -> [version, packed value], for the channels this checkpoint changed."""


@dataclass(frozen=True, slots=True)
class WriteRow:
    """A decoded ``write`` row."""

    seq: int
    ns: str
    checkpoint_id: str
    task_id: str
    idx: int
    channel: str
    value: list[str]
    task_path: str


def kind_of(message: StoredMessage) -> str | None:
    """The row's kind (``blob``, ``checkpoint``, ``write``), or None for a message that is
    not the checkpointer's (a published transcript message)."""
    if message.role != "other":
        return None
    kind = message.metadata.get(KIND)
    return kind if isinstance(kind, str) else None


def approx_size(message: StoredMessage) -> int:
    """Roughly the bytes ``message`` holds in memory: its strings (a checkpointer row's
    packed values are strings), plus a fixed overhead."""
    content = message.content
    if isinstance(content, str):
        return 256 + len(content)
    if type(content) is dict or isinstance(content, Mapping):
        total = 256
        for name, value in content.items():
            if isinstance(value, str):
                total += len(value)
            elif isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
                total += len(value[1])  # a packed value: [type, base64]
            elif name == "values" and isinstance(value, dict):
                total += sum(_packed_size(v) for v in value.values())  # [version, packed]
            elif isinstance(value, (dict, list)):
                total += 64 * len(value)
        return total
    if isinstance(content, list):
        return 256 + sum(len(v) if isinstance(v, str) else 1024 for v in content)
    return 256


def _packed_size(entry: Any) -> int:
    """Roughly the bytes of a ``[version, [type, base64]]`` entry of ``values``."""
    if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list):
        packed = entry[1]
        if len(packed) == 2 and isinstance(packed[1], str):
            return 64 + len(packed[1])
    return 64


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # a plain dict: no ABC check


def own_of(message: StoredMessage) -> int | None:
    """The checkpointer's row count a checkpoint or write row carries, else None."""
    if kind_of(message) in ("checkpoint", "write") and _is_mapping(message.content):
        own = message.content.get("own")
        if isinstance(own, int):
            return own
    return None


def heads_of(message: StoredMessage) -> Heads | None:
    """The ``heads`` a checkpoint or write row carries, else None."""
    if kind_of(message) in ("checkpoint", "write") and _is_mapping(message.content):
        heads = message.content.get("heads")
        if isinstance(heads, dict):
            return heads
    return None


def blob_message(
    ns: str, checkpoint_id: str, channel: str, version: str, value: list[str]
) -> Message:
    """The row holding ``channel``'s value at ``version``, written by ``checkpoint_id``."""
    return Message(
        row_id("b", ns, checkpoint_id, channel),
        "other",
        {"ns": ns, "ch": channel, "v": version, "value": value},
        {KIND: "blob"},
    )


def checkpoint_message(
    ns: str,
    checkpoint_id: str,
    parent: str | None,
    checkpoint: list[str],
    metadata: list[str],
    locs: Mapping[str, list[Any]],
    prev_max: str | None,
    heads: Heads,
    own: int,
    values: Mapping[str, list[Any]],
) -> Message:
    """The checkpoint's row (see the module docstring)."""
    return Message(
        checkpoint_row_id(ns, checkpoint_id),
        "other",
        {
            "ns": ns,
            "id": checkpoint_id,
            "parent": parent,
            "checkpoint": checkpoint,
            "metadata": metadata,
            "locs": dict(locs),
            "prev_max": prev_max,
            "heads": heads,
            "own": own,
            "values": dict(values),
        },
        {KIND: "checkpoint"},
    )


def checkpoint_row_id(ns: str, checkpoint_id: str) -> str:
    """The message id of checkpoint ``checkpoint_id`` in namespace ``ns``."""
    return row_id("c", ns, checkpoint_id)


def write_message(
    ns: str,
    checkpoint_id: str,
    task_id: str,
    idx: int,
    channel: str,
    value: list[str],
    task_path: str,
    heads: Heads,
    own: int,
) -> Message:
    """One pending write; its id makes (checkpoint, task, index) written at most once."""
    return Message(
        row_id("w", ns, checkpoint_id, task_id, str(idx)),
        "other",
        {
            "ns": ns,
            "ckpt": checkpoint_id,
            "task": task_id,
            "idx": idx,
            "ch": channel,
            "value": value,
            "path": task_path,
            "heads": heads,
            "own": own,
        },
        {KIND: "write"},
    )


def as_checkpoint(message: StoredMessage) -> CheckpointRow | None:
    """The decoded checkpoint row, or None if ``message`` is not one."""
    if kind_of(message) != "checkpoint":
        return None
    c = message.content
    return CheckpointRow(
        seq=message.seq,
        ns=c["ns"],
        id=c["id"],
        parent=c["parent"],
        checkpoint=c["checkpoint"],
        metadata=c["metadata"],
        locs=c["locs"],
        prev_max=c["prev_max"],
        heads=c["heads"],
        values=c.get("values") or {},
    )


def as_write(message: StoredMessage) -> WriteRow | None:
    """The decoded write row, or None if ``message`` is not one."""
    if kind_of(message) != "write":
        return None
    c = message.content
    return WriteRow(
        seq=message.seq,
        ns=c["ns"],
        checkpoint_id=c["ckpt"],
        task_id=c["task"],
        idx=int(c["idx"]),
        channel=c["ch"],
        value=c["value"],
        task_path=c["path"],
    )


def blob_value(message: StoredMessage) -> tuple[str, str, str, list[str]] | None:
    """``(ns, channel, version, packed value)`` of a blob row, else None."""
    if kind_of(message) != "blob":
        return None
    c = message.content
    return c["ns"], c["ch"], c["v"], c["value"]


def values_in(message: StoredMessage) -> tuple[str, dict[str, list[Any]]] | None:
    """``(ns, {channel: [version, packed value]})``: the channel values a checkpoint
    row or (in older threads) a blob row holds, else None."""
    kind = kind_of(message)
    c = message.content
    if kind == "checkpoint":
        return c["ns"], c.get("values") or {}
    if kind == "blob":
        return c["ns"], {c["ch"]: [c["v"], c["value"]]}
    return None
