"""ConversationStore on files: the transcript files of transcript.py under the key lock,
with the header's ``conv`` entry as the commit point, and one listing entry per
conversation in its owner's folder."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from datetime import timedelta
from typing import Any

from agentstores.errors import AgentStoresError, Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.models import (
    ConversationInfo,
    ConversationTail,
    LastTurnStatus,
    Page,
    StoredMessage,
    TranscriptMessage,
)
from agentstores.stores import (
    AppendRequest,
    ConversationStore,
    Cut,
    EncodedMessage,
    Expired,
    IdleFor,
    MetadataUpdate,
    OverCap,
    SweepRule,
    TranscriptQuery,
    cut_position,
    decode_metadata,
    kit,
    merge_metadata,
)

from ._base import FileStoreBase, off_loop
from .codec import reencode
from .header import ERASED, LIVE, Head, erased_until, key_check
from .transcript import Entry, NewMessage, Transcript, new_meta, transcript_files

COPY_CHUNK = 512
"""Messages a branch copies per read of the source transcript."""

_MICROSECOND = timedelta(microseconds=1)


def _new(m: EncodedMessage) -> NewMessage:
    return NewMessage(
        id=m.message.id,
        role=m.message.role,
        compaction=m.message.compaction,
        content_json=m.content_json,
        metadata_json=m.metadata_json,
    )


def _no_message(message_id: str, key: ConversationKey) -> AgentStoresError:
    """The refusal of a truncate or branch at a message the transcript does not hold."""
    message = f"no message {message_id!r} in this conversation"
    return refusal_error(Refusal.NOT_FOUND, message, key=key)


def _merged(conv: dict[str, Any], updates: MetadataUpdate) -> dict[str, str]:
    """The header's ``md`` (name -> canonical JSON text) with ``updates`` merged in; an
    older header without ``md`` has none."""
    current = {name: text.encode() for name, text in conv.get("md", {}).items()}
    return {name: raw.decode() for name, raw in merge_metadata(current, updates).items()}


def _info(key: ConversationKey, h: Head) -> ConversationInfo:
    conv = h["conv"]
    return ConversationInfo(
        key=key,
        owner=h["owner"],
        title=conv["title"],
        created_at=kit.from_micros(conv["created"]),
        updated_at=kit.from_micros(conv["updated"]),
        expires_at=None if conv["expires"] is None else kit.from_micros(conv["expires"]),
        last_turn_status=conv["lts"],
        tail_message_id=conv["tail"],
        message_count=conv["n"],
        shared_with=frozenset(h["shared"]),
        metadata=decode_metadata(conv.get("md", {})),
    )


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
            created_at=kit.from_micros(e.created),
        )
        for e, r in zip(entries, t.records(entries), strict=True)
    ]


class FileConversationStore(FileStoreBase, ConversationStore):
    # --- writes ------------------------------------------------------------------

    @contextmanager
    def _changing(
        self, key: ConversationKey, principal: str, epoch: int | None
    ) -> Iterator[tuple[str, Head, int]]:
        """Under the key's exclusive lock: the live conversation's directory, its header
        (the key-header rule for a write at ``epoch`` passed) and the store clock."""
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                raise refusal_error(Refusal.NOT_FOUND, key=key)
            now = root.now_us()
            h, status = root.head(kdir, key, now)
            if status == ERASED:
                raise refusal_error(Refusal.ERASED, key=key, until=erased_until(h))
            if h is None or status != LIVE or h["conv"] is None:
                raise refusal_error(Refusal.NOT_FOUND, key=key)
            root.check_write(key, h, status, principal, epoch)
            yield kdir, h, now

    def _new_conversation(self, kdir: str, key: ConversationKey, h: Head, now: int) -> None:
        """Start an empty transcript: clear files a crash or an old life left behind,
        and enter the key in its owner's listing before the header names it."""
        io = self.root.io
        stale = transcript_files(io.listdir(kdir))
        for name in stale:
            io.unlink(os.path.join(kdir, name))
        if stale:
            io.sync_dir(kdir)
        owners = self.root.owner_dir(key.tenant, h["owner"])
        while True:
            io.ensure_dir(owners)
            try:
                io.create_empty(os.path.join(owners, key.digest))
                break
            except FileNotFoundError:  # the owner's last erasure removed the folder
                continue
        h["conv"] = new_meta(now)

    def _unlist(self, key: ConversationKey, owner: str) -> None:
        """Remove ``key``'s listing entry, and the owner's folder with their last one:
        an owner with no conversation left leaves nothing behind."""
        io = self.root.io
        owners = self.root.owner_dir(key.tenant, owner)
        if not io.unlink(os.path.join(owners, key.digest)):
            return
        if io.remove_empty_dir(owners):
            io.sync_dir(os.path.dirname(owners))
            return
        with suppress(FileNotFoundError):  # another erasure removed it meanwhile
            io.sync_dir(owners)

    def _drop(self, kdir: str, names: list[str]) -> None:
        """Remove files a committed header no longer names (best effort)."""
        removed = False
        for name in names:
            with suppress(OSError):
                removed = self.root.io.unlink(os.path.join(kdir, name)) or removed
        if removed:
            with suppress(OSError):
                self.root.io.sync_dir(kdir)

    def _touch(self, kdir: str, h: Head, epoch: int | None, now: int) -> None:
        """Commit a metadata change: raise the fence, bump ``updated``, write the header."""
        h["fence"] = kit.raised_fence(h["fence"], epoch)
        h["conv"]["updated"] = max(h["conv"]["updated"], now)
        self.root.put_head(kdir, h)

    @off_loop
    def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        root = self.root
        kdir = root.key_dir(key)
        # A key without a directory has no tail: an append expecting one is refused
        # before a directory is made for it.
        expects = request.has_tail_condition and request.expected_tail is not None
        with root.locked(
            kdir, exclusive=True, create=request.create_if_absent and not expects
        ) as exists:
            if not exists:
                if request.create_if_absent:
                    raise refusal_error(
                        Refusal.STALE_TAIL, key=key, tail=None, expected=request.expected_tail
                    )
                raise refusal_error(Refusal.NOT_FOUND, key=key)
            now = root.now_us()
            h, status = root.head(kdir, key, now)
            if status == ERASED:
                raise refusal_error(Refusal.ERASED, key=key, until=erased_until(h))
            conv = h["conv"] if status == LIVE and h is not None else None
            if conv is None and not request.create_if_absent:
                raise refusal_error(Refusal.NOT_FOUND, key=key)
            root.check_write(key, h, status, principal, request.epoch)
            with ExitStack() as stack:
                t = None
                if conv is not None:
                    t = stack.enter_context(Transcript(root.io, kdir, conv, write=True))
                    fresh = [m for m in request.messages if t.find(m.message.id) is None]
                else:
                    fresh = list(request.messages)
                if request.messages and not fresh:
                    return []
                if request.has_tail_condition:
                    tail = conv["tail"] if conv is not None else None
                    if tail != request.expected_tail:
                        raise refusal_error(
                            Refusal.STALE_TAIL, key=key, tail=tail, expected=request.expected_tail
                        )
                merged = None
                if request.metadata is not None:
                    merged = _merged(conv or {}, request.metadata)
                new = root.claim(kdir, key, h, status, principal)
                if conv is None:
                    self._new_conversation(kdir, key, new, now)
                    conv = new["conv"]
                    t = stack.enter_context(Transcript(root.io, kdir, conv, write=True))
                assert t is not None
                new["fence"] = kit.raised_fence(new["fence"], request.epoch)
                last = conv["last"]
                stamp = max(now, last) if conv["n"] > 0 and last is not None else now
                seqs = t.append([_new(m) for m in fresh], stamp)
                if request.last_turn_status is not None:
                    conv["lts"] = request.last_turn_status
                if request.title is not None:
                    conv["title"] = request.title
                if request.expires_at is not None:
                    conv["expires"] = kit.to_micros(request.expires_at)
                if merged is not None:
                    conv["md"] = merged
                conv["updated"] = max(conv["updated"], now)
                root.put_head(kdir, new)
                self._drop(kdir, t.obsolete)
            created = kit.from_micros(stamp)
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

    @off_loop
    def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return
            now = root.now_us()
            h, key_status = root.head(kdir, key, now)
            if key_status != LIVE or h is None or h["conv"] is None:
                return
            root.check_write(key, h, key_status, principal, epoch)
            h["conv"]["lts"] = status
            self._touch(kdir, h, epoch, now)

    @off_loop
    def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        with self._changing(key, principal, epoch) as (kdir, h, now):
            h["conv"]["title"] = title
            self._touch(kdir, h, epoch, now)

    @off_loop
    def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        with self._changing(key, principal, epoch) as (kdir, h, now):
            h["conv"]["md"] = _merged(h["conv"], updates)
            self._touch(kdir, h, epoch, now)

    @off_loop
    def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        with self._changing(key, principal, None) as (kdir, h, _):
            members = set(h["shared"])
            before = set(members)
            if shared:
                members.add(with_principal)
            else:
                members.discard(with_principal)
            if members != before:
                h["shared"] = sorted(members)
                self.root.put_head(kdir, h)

    @off_loop
    def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        with self._changing(key, principal, epoch) as (kdir, h, now):
            if expected_tail is not None:
                kit.check_tail(key, h["conv"]["tail"], expected_tail)
            with Transcript(self.root.io, kdir, h["conv"], write=True) as t:
                target = t.find(message_id)
                if target is None:
                    raise _no_message(message_id, key)
                removed = t.cut(cut_position(target.seq, target.role, cut))
            self._touch(kdir, h, epoch, now)
            return removed

    @off_loop
    def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        root = self.root
        kdir = root.key_dir(key)
        ndir = root.key_dir(new_key)
        while True:
            with ExitStack() as stack:
                # Both locks, always in digest order, so two branches cannot deadlock;
                # the new key's directory is made only once nothing refuses the branch.
                held = {}
                for d in sorted((kdir, ndir)):
                    held[d] = stack.enter_context(root.locked(d, exclusive=d == ndir, create=False))
                if not held[kdir]:
                    raise refusal_error(Refusal.NOT_FOUND, key=key)
                now = root.now_us()
                h, status = root.head(kdir, key, now)
                if not root.can_read(h, status, principal) or h is None or h["conv"] is None:
                    raise refusal_error(Refusal.NOT_FOUND, key=key)
                source = stack.enter_context(Transcript(root.io, kdir, h["conv"], write=False))
                target = source.find(message_id)
                if target is None:
                    raise _no_message(message_id, key)
                if not held[ndir]:
                    # Its lock comes first: make it, take both again. (Should the source
                    # change meanwhile and refuse, the empty directory stays for the
                    # key's next write; without the race nothing is ever left.)
                    if ndir < kdir:
                        root.io.ensure_dir(ndir)
                        continue
                    stack.enter_context(root.locked(ndir, exclusive=True, create=True))
                nh, nstatus = root.head(ndir, new_key, now)
                if nstatus in (LIVE, ERASED):
                    raise refusal_error(
                        Refusal.EXISTS, "the branch's key is already in use", key=new_key
                    )
                new = root.claim(ndir, new_key, nh, nstatus, principal)
                self._new_conversation(ndir, new_key, new, now)
                conv = new["conv"]
                conv["title"] = h["conv"]["title"]
                conv["md"] = dict(h["conv"].get("md", {}))
                copy = stack.enter_context(Transcript(root.io, ndir, conv, write=True))
                for lo in range(0, target.seq + 1, COPY_CHUNK):
                    entries = source.entries(lo, min(target.seq + 1, lo + COPY_CHUNK))
                    chunk = [
                        NewMessage(
                            id=uuid.uuid4().hex,
                            role=e.role,
                            compaction=e.compaction,
                            content_json=reencode(r["c"]),
                            metadata_json=reencode(r["m"]),
                        )
                        for e, r in zip(entries, source.records(entries), strict=True)
                    ]
                    copy.append(chunk, now)
                root.put_head(ndir, new)
                self._drop(ndir, copy.obsolete)
                return

    def _matches(self, key: ConversationKey, h: Head, rule: SweepRule, now: int) -> bool:
        """Whether a live conversation falls under a sweep rule at ``now``."""
        conv = h["conv"]
        if isinstance(rule, Expired):
            return conv["expires"] is not None and conv["expires"] <= now
        if isinstance(rule, IdleFor):
            return bool(conv["updated"] < now - rule.duration // _MICROSECOND)
        assert isinstance(rule, OverCap)
        mine = (conv["updated"], key.session_id)
        newer = sum(
            1
            for other, oh in self._owned_by(key.tenant, h["owner"])
            if other != key and (oh["conv"]["updated"], other.session_id) > mine
        )
        return newer >= rule.keep

    @off_loop
    def _erase(self, key: ConversationKey, principal: str | None, rule: SweepRule | None) -> bool:
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=True, create=False) as exists:
            if not exists:
                return False
            now = root.now_us()
            h, status = root.head(kdir, key, now)
            if status != LIVE or h is None:
                return False
            if principal is not None and h["owner"] != principal:
                raise refusal_error(
                    Refusal.NOT_OWNED, "only the owner may delete a conversation", key=key
                )
            if rule is not None and (h["conv"] is None or not self._matches(key, h, rule, now)):
                return False
            tomb = {
                "kc": key_check(key),
                "erased_until": now + root.tombstone_ttl // _MICROSECOND,
                "fence": h["fence"],
            }
            root.put_head(kdir, tomb)
            root.purge(kdir)
            self._unlist(key, h["owner"])
            return True

    # --- reads -------------------------------------------------------------------

    @contextmanager
    def _visible(
        self, key: ConversationKey, principal: str
    ) -> Iterator[tuple[Head, Transcript] | None]:
        """The visible header and its transcript under the key's shared lock, or None."""
        root = self.root
        kdir = root.key_dir(key)
        with root.locked(kdir, exclusive=False, create=False) as exists:
            if not exists:
                yield None
                return
            h, status = root.head(kdir, key, root.now_us())
            if not root.can_read(h, status, principal) or h is None or h["conv"] is None:
                yield None
                return
            with Transcript(root.io, kdir, h["conv"], write=False) as t:
                yield h, t

    @contextmanager
    def _reading(self, key: ConversationKey, principal: str) -> Iterator[Transcript | None]:
        """The visible transcript under the key's shared lock, or None."""
        with self._visible(key, principal) as found:
            yield None if found is None else found[1]

    @off_loop
    def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
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
                start, end = (kit.to_micros(v) for v in query.time_range)
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
                    created_at=kit.from_micros(e.created),
                )
                for n, (e, r) in enumerate(zip(entries, t.records(entries), strict=True))
            ]

    @off_loop
    def _recent(self, key: ConversationKey, principal: str, limit: int) -> list[StoredMessage]:
        with self._reading(key, principal) as t:
            if t is None:
                return []
            seqs: list[int] = []
            for kind in ("user", "assistant"):
                total = t.kind_count(kind)
                seqs.extend(t.positions(kind, max(0, total - limit), total))
            return _stored(t, sorted(seqs)[-limit:])

    @off_loop
    def _tail(self, key: ConversationKey, principal: str, limit: int) -> ConversationTail | None:
        """The header and the last rows it commits, read under one shared lock: no
        writer comes between them."""
        with self._visible(key, principal) as found:
            if found is None:
                return None
            h, t = found
            rows = _stored(t, list(range(max(0, t.count - limit), t.count)))
            return ConversationTail(_info(key, h), rows)

    @off_loop
    def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        with self._reading(key, principal) as t:
            if t is None:
                return []
            compactions = t.kind_count("compaction")
            start = t.positions("compaction", compactions - 1, compactions)[0] if compactions else 0
            return _stored(t, list(range(start, t.count)))

    @off_loop
    def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        with self._reading(key, principal) as t:
            if t is None:
                return []
            end = t.count if limit is None else min(t.count, start + limit)
            return _stored(t, list(range(start, end)))

    @off_loop
    def _get_conversation(self, key: ConversationKey, principal: str) -> ConversationInfo | None:
        root = self.root
        h, status = root.head(root.key_dir(key), key, root.now_us())
        if not root.can_read(h, status, principal) or h is None or h["conv"] is None:
            return None
        return _info(key, h)

    def _owned_by(self, tenant: str, owner: str) -> list[tuple[ConversationKey, Head]]:
        """Live conversations of ``owner`` in ``tenant``: the listing entries, each
        confirmed by its header (entries a crash left behind are skipped)."""
        root = self.root
        found = []
        for digest in root.io.listdir(root.owner_dir(tenant, owner)):
            if len(digest) != 64:
                continue
            h = root.load_head(root.key_dir_of_digest(digest))
            if h is None or h.get("erased_until") is not None or h.get("conv") is None:
                continue
            key = ConversationKey.from_storage_name(h["key"])
            if key.tenant == tenant and h["owner"] == owner:
                found.append((key, h))
        return found

    @off_loop
    def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        after = kit.decode_cursor(cursor) if cursor is not None else None
        mine = sorted(
            (
                ((h["conv"]["updated"], key.session_id), key, h)
                for key, h in self._owned_by(tenant, principal)
            ),
            key=lambda item: item[0],
            reverse=True,
        )
        mine = [item for item in mine if kit.after_cursor(*item[0], after)]
        page = mine[:limit]
        next_cursor = kit.encode_cursor(*page[-1][0]) if len(mine) > limit and page else None
        return Page([_info(key, h) for _, key, h in page], next_cursor)

    @off_loop
    def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        """Scans every key's header: O(conversations in the store)."""
        root = self.root
        now = root.now_us()
        live: list[tuple[ConversationKey, Head]] = []
        for shard in sorted(root.io.listdir(root.keys_root)):
            for digest in sorted(root.io.listdir(os.path.join(root.keys_root, shard))):
                h = root.load_head(root.key_dir_of_digest(digest))
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


__all__ = ["FileConversationStore"]
