"""Structural check of a whole file store: what must hold after any crash.

Reads every key directory under its shared lock and checks that the header parses, that
the heartbeat file (if any) has its size, that
every committed message record parses and agrees with its index entry (id hash,
contiguous offsets, monotonic ``created_at``, role ranks), that the per-speaker
indexes list exactly the messages of that speaker, that the id table finds every
committed id, that the tail and counts in the header match, and that every live
conversation is in its owner's listing. Returns a summary per key.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agentstores.keys import ConversationKey
from agentstores_file import beat
from agentstores_file.fsio import FileIO
from agentstores_file.header import FileRoot
from agentstores_file.supervision import current_row
from agentstores_file.transcript import Transcript, id_hash


def verify_store(root: str) -> dict[str, dict[str, Any]]:
    files = FileRoot(root, io=FileIO(fsync=False))
    summary: dict[str, dict[str, Any]] = {}
    keys_root = os.path.join(root, "keys")
    for shard in sorted(_listdir(keys_root)):
        for digest in sorted(_listdir(os.path.join(keys_root, shard))):
            assert digest[:2] == shard and len(digest) == 64, digest
            kdir = os.path.join(keys_root, shard, digest)
            with files.locked(kdir, exclusive=False, create=False) as held:
                assert held
                raw = files.io.read_file(os.path.join(kdir, "head"))
                if raw is None:
                    continue  # a key directory whose first write never committed
                head = json.loads(raw)
                if "erased_until" in head:
                    summary[digest] = {"erased": True}
                    continue
                key = ConversationKey.from_storage_name(head["key"])
                assert key.digest == digest
                info: dict[str, Any] = {"key": key, "owner": head["owner"]}
                info["fence"] = head["fence"]
                info["sup"] = current_row(files, kdir, head)
                beats = files.io.read_file(os.path.join(kdir, beat.NAME))
                if beats is not None:  # whole size (a claim's blank file has no valid slot)
                    beat.slots(beats, kdir)
                for name in ("state", "recording"):
                    blob = files.read_side(kdir, head, name)
                    if blob is not None:
                        body = blob if name == "state" else blob.partition(b"\n")[2]
                        info[name] = json.loads(body)
                tokens = {}
                names = {
                    "tokens/" + n
                    for n in _listdir(os.path.join(kdir, "tokens"))
                    if not n.startswith(".")
                }
                names.update(dst for _, dst in head.get("redo") or () if dst.startswith("tokens/"))
                for name in sorted(names):
                    blob = files.read_side(kdir, head, name)
                    if blob is None:
                        continue
                    line, _, body = blob.partition(b"\n")
                    meta = json.loads(line)
                    json.loads(body)
                    tokens[meta["t"]] = meta["s"]
                info["tokens"] = tokens
                if head["conv"] is not None:
                    info["messages"] = _check_transcript(files, kdir, key, head)
                summary[digest] = info
    return summary


def _check_transcript(
    files: FileRoot, kdir: str, key: ConversationKey, head: dict[str, Any]
) -> list[tuple[str, str, Any]]:
    conv = head["conv"]
    entry_path = os.path.join(files.owner_dir(key.tenant, head["owner"]), key.digest)
    assert os.path.exists(entry_path), f"{key} is missing from its owner's listing"
    with Transcript(files.io, kdir, conv, write=False) as t:
        n = t.count
        entries = t.entries(0, n)
        assert len(entries) == n
        records = t.records(entries)
        offset, last, ranks = 0, None, {"user": 0, "assistant": 0, "compaction": 0}
        positions: dict[str, list[int]] = {"user": [], "assistant": [], "compaction": []}
        for e, r in zip(entries, records, strict=True):
            assert e.offset == offset, (key, e)
            offset += e.length
            assert e.idhash == id_hash(r["i"]), (key, e, r)
            assert last is None or e.created >= last
            last = e.created
            assert (e.urank, e.arank, e.crank) == (
                ranks["user"],
                ranks["assistant"],
                ranks["compaction"],
            )
            for kind, hit in (
                ("user", e.role == "user"),
                ("assistant", e.role == "assistant"),
                ("compaction", e.compaction),
            ):
                if hit:
                    positions[kind].append(e.seq)
                    ranks[kind] += 1
        assert conv["end"] == offset
        assert (conv["nu"], conv["na"], conv["nc"]) == (
            ranks["user"],
            ranks["assistant"],
            ranks["compaction"],
        )
        for kind, seqs in positions.items():
            assert t.positions(kind, 0, len(seqs)) == seqs, kind
        ids = [r["i"] for r in records]
        assert len(set(ids)) == n, f"duplicate message ids in {key}"
        assert conv["tail"] == (ids[-1] if ids else None)
        for seq, message_id in enumerate(ids):
            found = t.find(message_id)
            assert found is not None and found.seq == seq, (key, message_id)
        return [(r["i"], e.role, r["c"]) for e, r in zip(entries, records, strict=True)]


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
