"""The message documents of ``<prefix>messages``: their layout, and turning them into
the store's models.

A message document: ``_id`` = ``<generation>/<seq as 16 hex digits>`` (so a position is
found, and a page of positions fetched with ``$in``, through the ``_id`` index on every
server: nx-27017 scans the whole collection for compound-index queries), ``q`` =
``<generation>/<role>/<rank>`` (the speaker view's position) and ``ci`` =
``<generation>/<message id>`` (single-field indexes, looked up by equality), ``c``
generation, ``s`` seq, ``b`` the header rev its writer read,
``w`` writer nonce, ``i`` id, ``r`` role, ``k`` compaction, ``ct``/``md`` content and
metadata (canonical JSON text), ``at`` created_at (the server's clock, in microseconds:
nx-27017 compares datetimes wrongly in range queries), ``nu``/``na``
user and assistant messages before it, ``rk`` its rank among messages of its role,
``pc`` the latest compaction before it (-1: none).

An append inserts its messages at ``s >= c.n`` and commits by the header CAS raising
``c.n``; readers read only ``s < c.n``. A document in the way at the same seq is either
another writer's in flight (written at the header's current rev: it gets
``stall_after`` seconds, then is retired) or garbage (older rev, never committable:
deleted, guarded by its rev).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentstores.models import StoredMessage, TranscriptMessage
from agentstores.stores import kit

PAGE = 256
"""Positions one read fetches by ``_id``."""
BY_EQUALITY = 16
"""Batches up to this size check which ids are present with one indexed equality each."""


def mid(gen: str, seq: int) -> str:
    """The ``_id`` of the message at ``seq`` in generation ``gen``."""
    return f"{gen}/{seq:016x}"


def rank_key(gen: str, role: str, rank: int) -> str:
    return f"{gen}/{role}/{rank:016x}"


def id_key(gen: str, message_id: str) -> str:
    return f"{gen}/{message_id}"


def new_conv(created_us: int) -> dict[str, Any]:
    return {
        "ti": None,
        "lts": None,
        "tl": None,
        "n": 0,
        "ca": created_us,
        "la": None,
        "nu": 0,
        "na": 0,
        "lc": -1,
        "md": [],
    }


def stored(doc: dict[str, Any]) -> StoredMessage:
    return StoredMessage(
        id=doc["i"],
        role=doc["r"],
        content=json.loads(doc["ct"]),
        metadata=json.loads(doc["md"]),
        compaction=bool(doc["k"]),
        seq=doc["s"],
        created_at=kit.from_micros(doc["at"]),
    )


def transcript_row(index: int, doc: dict[str, Any]) -> TranscriptMessage:
    return TranscriptMessage(
        index=index,
        role=doc["r"],
        content=json.loads(doc["ct"]),
        id=doc["i"],
        created_at=kit.from_micros(doc["at"]),
    )


def message_docs(
    conv: dict[str, Any],
    gen: str,
    base: int,
    nonce: str,
    items: Sequence[tuple[str, str, bool, str, str]],
    at: datetime,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The documents of ``items`` (id, role, compaction, content, metadata) appended to
    ``conv``, and the conversation metadata after them."""
    conv = dict(conv)
    docs = []
    for message_id, role, compaction, content, metadata in items:
        seq = conv["n"]
        rank = conv["nu"] if role == "user" else conv["na"] if role == "assistant" else seq
        docs.append(
            {
                "_id": mid(gen, seq),
                "q": rank_key(gen, role, rank),
                "ci": id_key(gen, message_id),
                "c": gen,
                "s": seq,
                "b": base,
                "w": nonce,
                "i": message_id,
                "r": role,
                "k": compaction,
                "ct": content,
                "md": metadata,
                "at": kit.to_micros(at),
                "nu": conv["nu"],
                "na": conv["na"],
                "rk": rank,
                "pc": conv["lc"],
            }
        )
        conv["n"] = seq + 1
        conv["tl"] = message_id
        if role == "user":
            conv["nu"] += 1
        elif role == "assistant":
            conv["na"] += 1
        if compaction:
            conv["lc"] = seq
    if docs:
        conv["la"] = kit.to_micros(at)
    return docs, conv


__all__ = [
    "BY_EQUALITY",
    "PAGE",
    "id_key",
    "message_docs",
    "mid",
    "new_conv",
    "rank_key",
    "stored",
    "transcript_row",
]
