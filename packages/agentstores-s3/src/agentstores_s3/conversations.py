"""ConversationStore on S3: metadata and the last append in the key header, messages in
objects named by position (see transcript.py); every write is one conditional header
write, so each call is atomic and concurrent calls serialise on the header's ETag.

Listing and the sweeper read the listing entries ``o/<owner>/<d>`` and confirm each
against its header (a documented scan: a principal's conversations for a listing, every
conversation under the prefix for a sweep), re-checking at erase time.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Callable
from typing import Any

from agentstores.errors import Refusal, refusal_error
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

from ._base import S3StoreBase, off_loop
from .header import ERASED, FRESH_GUESS, LIVE, Head, Outcome, loads
from .transcript import (
    Conv,
    Transcript,
    appended_only,
    head_conv,
    held_back,
    message_name,
    new_conv,
    pending_start,
    run_of,
    split_window,
    to_stored,
)

READ_ATTEMPTS = 8
"""Reads that found a message object gone (erased meanwhile) before giving up."""


def _info(key: ConversationKey, h: Head, conv: Conv) -> ConversationInfo:
    return ConversationInfo(
        key=key,
        owner=h["owner"],
        title=conv["t"],
        created_at=kit.from_micros(conv["c"]),
        updated_at=kit.from_micros(conv["u"]),
        expires_at=None if conv["x"] is None else kit.from_micros(conv["x"]),
        last_turn_status=conv["l"],
        tail_message_id=conv["tail"],
        message_count=int(conv["n"]),
        shared_with=frozenset(h["shared"]),
        metadata=decode_metadata(conv.get("md", {})),
    )


def _merged(conv: Conv | None, updates: MetadataUpdate) -> dict[str, str]:
    """The header's ``md`` (name -> canonical JSON text; absent in older headers) with
    ``updates`` merged in."""
    stored = {} if conv is None else conv.get("md", {})
    current = {name: value.encode() for name, value in stored.items()}
    return {name: raw.decode() for name, raw in merge_metadata(current, updates).items()}


class S3ConversationStore(S3StoreBase, ConversationStore):
    # --- helpers -------------------------------------------------------------------

    def _owned(
        self, key: ConversationKey, h: Head | None, status: str, principal: str, epoch: int | None
    ) -> tuple[Head, Conv]:
        """A copy of the header and its conversation for a write by ``principal``."""
        if status == ERASED:
            raise self.root.erased(key, h)
        conv = head_conv(h) if status == LIVE else None
        if h is None or conv is None:
            raise refusal_error(Refusal.NOT_FOUND, key=key)
        self.root.check(key, h, status, principal, epoch)
        new = self.root.claim(key, h, status, principal, epoch)
        new["conv"] = dict(conv)
        return new, new["conv"]

    def _readable(self, key: ConversationKey, principal: str) -> tuple[Head, Conv] | None:
        h, status, _ = self.root.read(key)
        conv = head_conv(h)
        if not self.root.visible(h, status, principal) or h is None or conv is None:
            return None
        return h, conv

    @staticmethod
    def _touch(conv: Conv, now: int) -> None:
        conv["u"] = max(conv["u"], now)

    # --- writes --------------------------------------------------------------------

    @staticmethod
    def _grow(
        conv: Conv, fresh: list[Any], stamp: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any], list[dict[str, Any]]]:
        """What appending ``fresh`` (AppendRequest messages) to ``conv`` makes: ``(rows,
        leaving, segs, window)``: the new rows, the window rows that must be copied out,
        the runs and the window after."""
        first = int(conv["n"])
        rows = [
            {
                "q": first + i,
                "id": m.message.id,
                "r": m.message.role,
                "c": m.content_json.decode(),
                "md": m.metadata_json.decode(),
                "k": bool(m.message.compaction),
                "t": stamp,
            }
            for i, m in enumerate(fresh)
        ]
        segs = [list(s) for s in conv["segs"]]
        if rows:
            if not segs or segs[-1][0] != conv["gen"]:
                segs.append([conv["gen"], first, first])
            segs[-1][2] = first + len(rows)
        leaving, window = split_window(list(conv["p"]), rows)
        return rows, leaving, segs, window

    def _prefetch(
        self,
        key: ConversationKey,
        request: AppendRequest,
        transcript: Transcript,
        flushed: set[tuple[str, int]],
        written: list[str],
        copied: list[Any],
    ) -> tuple[Head | None, str | None] | None:
        """The header, read together with what an append goes on to need according to
        the version of it this bundle saw last: the id checks of the new messages, and
        the copy-out of the window rows they push out. None when that version is unknown
        or needs neither (the append then reads the header alone). ``copied[0]`` is set
        to the life of the header the copies come from.

        The copies are of rows that version committed, so they are right whatever the
        header read now says (a position is never reused within a run). The id checks
        count when the header read now is that very version (same ETag: every message
        outside its window had its id object before the checks were sent), or that
        version with appends only, every one of them still in the new window (see
        :func:`appended_only`): what left the window since was in the old one, so its
        positions are known without the id objects. Otherwise the append reads the
        header again.

        A call that lost a race guesses from the header it has just read (``transact``'s
        ``reread``), so its next attempt commits one round after the header read, as the
        last winner's does: without that, a loser read the header, then checked ids and
        copied out, then wrote, and a writer that kept winning kept the shorter race
        (four processes appending to one key: one made 98 appends while each other one
        waited 19 s)."""
        root = self.root
        cached = root.cached(key) if self.runner.concurrent else None
        conv = head_conv(cached[1]) if cached is not None else None
        if cached is None or conv is None or cached[1].get("erased_until") is not None:
            return None
        etag, seen, age = cached
        checks = [
            name for m in request.messages for name in transcript.id_checks(conv, m.message.id)
        ]
        in_window = {row["id"] for row in conv["p"]}
        fresh = [m for m in request.messages if m.message.id not in in_window]
        _, leaving, _, _ = self._grow(conv, fresh, 0)
        if age > FRESH_GUESS:
            leaving = []  # copied out after the header read instead
        copies = transcript.copies(conv, leaving)
        if not checks and not copies:
            return None
        copied[0] = seen.get("life")
        calls: list[Callable[[], Any]] = [functools.partial(root.load, key)]
        calls += [functools.partial(root.io.get, name) for name in checks]
        calls += [functools.partial(root.io.put, name, body) for name, body in copies]
        done = self.runner.together(calls)
        written.extend(name for name, _ in copies)  # sent, landed or not
        for future in done[1 + len(checks) :]:
            future.result()
        flushed.update((run_of(conv, row["q"]), row["q"]) for row in leaving)
        header: tuple[Head | None, str | None] = done[0].result()
        later = conv
        if header[1] != etag:
            read = header[0]
            same_life = read is not None and read.get("life") == seen.get("life")
            moved = head_conv(read) if same_life else None
            if moved is None or not appended_only(conv, moved):
                return None  # the append reads the header again
            later = moved
        transcript.known.update(
            (name, future.result()) for name, future in zip(checks, done[1:], strict=False)
        )
        transcript.known.update(transcript.left_window(conv, later))
        return header

    def _check_ids(self, conv: Conv, request: AppendRequest, transcript: Transcript) -> None:
        """Read the id objects the new messages need checked against ``conv`` (just
        read), all together, into ``transcript.known`` (those not there already)."""
        names = [
            name
            for m in request.messages
            for name in transcript.id_checks(conv, m.message.id)
            if name not in transcript.known
        ]
        done = self.runner.together([functools.partial(self.root.io.get, n) for n in names])
        transcript.known.update((name, f.result()) for name, f in zip(names, done, strict=True))

    def _copy_out(self, copies: list[tuple[str, bytes]], written: list[str]) -> None:
        """Write ``copies`` all together (every one has ended when this returns)."""
        io = self.root.io
        done = self.runner.together([functools.partial(io.put, n, b) for n, b in copies])
        written.extend(name for name, _ in copies)  # sent, landed or not
        for future in done:
            future.result()

    @off_loop
    def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        root = self.root
        transcript = Transcript(root.io, key)
        flushed: set[tuple[str, int]] = set()
        written: list[str] = []  # objects this call copied out, from a live header
        copied: list[Any] = [None]  # that header's life
        tries = [0]

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            tries[0] += 1
            if written and (status != LIVE or h is None or h.get("life") != copied[0]):
                # Copies of a life of the key that has ended since (erased, maybe created
                # anew): they may have landed after the erasure's sweep and must not
                # outlive it.
                root.io.delete_many(written)
                written.clear()
                flushed.clear()
            if status == LIVE and h is not None:
                copied[0] = h.get("life")
            if status == ERASED:
                raise self.root.erased(key, h)
            conv = head_conv(h) if status == LIVE else None
            if conv is None and not request.create_if_absent:
                raise refusal_error(Refusal.NOT_FOUND, key=key)
            root.check(key, h, status, principal, request.epoch)
            if conv is not None:
                self._check_ids(conv, request, transcript)
            fresh = [
                m
                for m in request.messages
                if conv is None or transcript.position(conv, m.message.id) is None
            ]
            transcript.known.clear()  # true of this header read only
            if request.messages and not fresh:
                return Outcome(None, [])
            if request.has_tail_condition:
                tail = conv["tail"] if conv is not None else None
                if tail != request.expected_tail:
                    raise refusal_error(
                        Refusal.STALE_TAIL, key=key, tail=tail, expected=request.expected_tail
                    )
            merged = None if request.metadata is None else _merged(conv, request.metadata)
            new = root.claim(key, h, status, principal, request.epoch)
            conv = dict(conv) if conv is not None else new_conv(now, kit.writer_nonce_hex())
            new["conv"] = conv
            stamp = max(now, conv["last"])
            first = int(conv["n"])
            rows, leaving, conv["segs"], conv["p"] = self._grow(conv, fresh, stamp)
            if rows:
                conv["tail"] = rows[-1]["id"]
                conv["last"] = stamp
            todo = [r for r in leaving if (run_of(conv, r["q"]), r["q"]) not in flushed]
            if todo and (tries[0] > 1 or guessed):
                # The header moved since this bundle saw it (a lost race, or a guess from
                # an older version): rows that would leave the window beyond what the
                # guess copied out stay in it (within twice its bounds) rather than cost
                # this attempt a round of copies the last writer's did not pay.
                held = held_back(leaving, conv["p"], {q for _, q in flushed})
                conv["p"] = held + conv["p"]
                todo = [r for r in todo if r not in held]
            self._copy_out(transcript.copies(conv, todo), written)  # committed rows only
            flushed.update((run_of(conv, r["q"]), r["q"]) for r in todo)
            conv["n"] = first + len(rows)
            if request.last_turn_status is not None:
                conv["l"] = request.last_turn_status
            if request.title is not None:
                conv["t"] = request.title
            if request.expires_at is not None:
                conv["x"] = kit.to_micros(request.expires_at)
            if merged is not None:
                conv["md"] = merged
            self._touch(conv, now)
            return Outcome(new, [to_stored(row) for row in rows])

        first = self._prefetch(key, request, transcript, flushed, written, copied)
        guessed = first is not None

        def reread() -> tuple[Head | None, str | None] | None:
            return self._prefetch(key, request, transcript, flushed, written, copied)

        result: list[StoredMessage] = root.transact(key, decide, first, reread)
        return result

    @off_loop
    def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        root = self.root

        def decide(h: Head | None, state: str, now: int) -> Outcome:
            if state != LIVE or head_conv(h) is None:
                return Outcome(None, None)
            new, conv = self._owned(key, h, state, principal, epoch)
            conv["l"] = status
            self._touch(conv, now)
            return Outcome(new, None)

        root.transact(key, decide)

    @off_loop
    def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        def decide(h: Head | None, status: str, now: int) -> Outcome:
            new, conv = self._owned(key, h, status, principal, epoch)
            conv["t"] = title
            self._touch(conv, now)
            return Outcome(new, None)

        self.root.transact(key, decide)

    @off_loop
    def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        def decide(h: Head | None, status: str, now: int) -> Outcome:
            new, conv = self._owned(key, h, status, principal, epoch)
            conv["md"] = _merged(conv, updates)
            self._touch(conv, now)
            return Outcome(new, None)

        self.root.transact(key, decide)

    @off_loop
    def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        def decide(h: Head | None, status: str, now: int) -> Outcome:
            new, _ = self._owned(key, h, status, principal, None)
            names = set(new["shared"])
            if (with_principal in names) == shared:
                return Outcome(None, None)
            if shared:
                names.add(with_principal)
            else:
                names.discard(with_principal)
            new["shared"] = sorted(names)
            return Outcome(new, None)

        self.root.transact(key, decide)

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
        root = self.root
        transcript = Transcript(root.io, key)

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            new, conv = self._owned(key, h, status, principal, epoch)
            if expected_tail is not None:
                kit.check_tail(key, conv["tail"], expected_tail)
            position = transcript.position(conv, message_id)
            row = None if position is None else transcript.row(conv, position)
            if position is None or row is None:
                raise refusal_error(
                    Refusal.NOT_FOUND, f"no message {message_id!r} in this conversation", key=key
                )
            first = cut_position(position, row["r"], cut)
            removed = int(conv["n"]) - first
            tail = None
            if first > 0:
                last = row if first == position + 1 else transcript.row(conv, first - 1)
                if last is None:
                    raise refusal_error(Refusal.NOT_FOUND, key=key)
                tail = last["id"]
            conv["segs"] = [
                [gen, start, min(end, first)] for gen, start, end in conv["segs"] if start < first
            ]
            conv["p"] = [r for r in conv["p"] if r["q"] < first]
            conv["n"] = first
            conv["tail"] = tail
            conv["gen"] = kit.writer_nonce_hex()
            self._touch(conv, now)
            return Outcome(new, removed)

        result: int = root.transact(key, decide)
        return result

    @off_loop
    def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        root = self.root
        source = self._read_snapshot(key, principal)
        if source is None:
            raise refusal_error(Refusal.NOT_FOUND, key=key)
        _, conv, rows = source
        position = next((i for i, r in enumerate(rows) if r["id"] == message_id), None)
        if position is None:
            raise refusal_error(
                Refusal.NOT_FOUND, f"no message {message_id!r} in this conversation", key=key
            )
        taken, _ = root.load(new_key)
        if root.status(taken, root.now_us()) in (LIVE, ERASED):
            raise refusal_error(Refusal.EXISTS, "the branch's key is already in use", key=new_key)
        now = root.now_us()
        gen = kit.writer_nonce_hex()
        copies = [
            {**row, "id": uuid.uuid4().hex, "t": now, "q": i}
            for i, row in enumerate(rows[: position + 1])
        ]
        Transcript(root.io, new_key).write_copy(gen, copies)

        def decide(found: Head | None, status: str, at: int) -> Outcome:
            if status in (LIVE, ERASED):
                raise refusal_error(
                    Refusal.EXISTS, "the branch's key is already in use", key=new_key
                )
            new = root.claim(new_key, found, status, principal, None)
            copy = new_conv(now, kit.writer_nonce_hex())
            copy.update(
                t=conv["t"],
                md=dict(conv.get("md", {})),
                n=len(copies),
                tail=copies[-1]["id"],
                last=now,
                segs=[[gen, 0, len(copies)]],
            )
            new["conv"] = copy
            return Outcome(new, None)

        root.transact(new_key, decide)

    def _matches(
        self, key: ConversationKey, h: Head, conv: Conv, rule: SweepRule, now: int
    ) -> bool:
        if isinstance(rule, Expired):
            return conv["x"] is not None and conv["x"] <= now
        if isinstance(rule, IdleFor):
            return kit.from_micros(conv["u"]) < kit.from_micros(now) - rule.duration
        assert isinstance(rule, OverCap)
        ranked = sorted(
            (
                (c["u"], k.session_id)
                for k, hh, c in self._owned_by(key.tenant, h["owner"])
                if hh["owner"] == h["owner"]
            ),
            reverse=True,
        )
        mine = (conv["u"], key.session_id)
        if mine not in ranked:
            ranked.append(mine)
            ranked.sort(reverse=True)
        return ranked.index(mine) >= rule.keep

    @off_loop
    def _erase(self, key: ConversationKey, principal: str | None, rule: SweepRule | None) -> bool:
        root = self.root

        def decide(h: Head | None, status: str, now: int) -> Outcome:
            if status == ERASED:
                return Outcome(None, None)
            if status != LIVE or h is None:
                return Outcome(None, False)
            if principal is not None and h["owner"] != principal:
                raise refusal_error(
                    Refusal.NOT_OWNED, "only the owner may delete a conversation", key=key
                )
            if rule is not None:
                conv = head_conv(h)
                if conv is None or not self._matches(key, h, conv, rule, now):
                    return Outcome(None, False)
            return Outcome(root.tombstone(key, h), h["owner"])

        owner = root.transact(key, decide)
        if owner is None:
            # Erased already: sweep again what an erasure whose sweep failed (a network
            # fault after its tombstone was written) left behind, so asking again
            # finishes it. Nothing of it is visible; the tombstone stays.
            with contextlib.suppress(Exception):
                root.purge(key)
            return False
        if owner is False:
            return False
        root.purge(key)
        root.io.delete(root.owner_dir(key.tenant, owner) + key.digest)
        return True

    # --- reads ---------------------------------------------------------------------

    def _rows(self, key: ConversationKey, conv: Conv, seqs: list[int]) -> list[Any] | None:
        transcript = Transcript(self.root.io, key)
        rows = self.runner.map(lambda q: transcript.row(conv, q), seqs)
        return None if any(r is None for r in rows) else rows

    def _read_snapshot(
        self, key: ConversationKey, principal: str, start: int = 0, limit: int | None = None
    ) -> tuple[Head, Conv, list[dict[str, Any]]] | None:
        """One header and the rows ``start .. start+limit`` it covers, all from it."""
        for _ in range(READ_ATTEMPTS):
            found = self._readable(key, principal)
            if found is None:
                return None
            h, conv = found
            count = int(conv["n"])
            end = count if limit is None else min(count, start + limit)
            rows = self._rows(key, conv, list(range(start, end)))
            if rows is not None:
                return h, conv, rows
        return None

    @off_loop
    def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        found = self._read_snapshot(key, principal, start, limit)
        return [] if found is None else [to_stored(row) for row in found[2]]

    @off_loop
    def _tail(self, key: ConversationKey, principal: str, limit: int) -> ConversationTail | None:
        """One header GET: the metadata and the window of newest rows it holds (the
        last append whole, up to ``WINDOW`` rows). Rows older than the window are then
        one GET each, all at once, of objects that header names and that never change."""
        for _ in range(READ_ATTEMPTS):
            found = self._readable(key, principal)
            if found is None:
                return None
            h, conv = found
            count, first = int(conv["n"]), pending_start(conv)
            start = max(0, count - limit)
            window = conv["p"][max(0, start - first) :]
            older = self._rows(key, conv, list(range(start, min(first, count))))
            if older is not None:
                rows = [to_stored(row) for row in older + window]
                return ConversationTail(_info(key, h, conv), rows)
        return None

    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        if query.index is not None and query.speaker == "all":
            return await self._one(key, principal, query.index)
        if query.time_range is not None and query.speaker == "all":
            return await super()._get_transcript(key, principal, query)  # a binary search
        return await self._filtered(key, principal, query)

    @off_loop
    def _filtered(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        """A speaker view (or the whole transcript) from one header snapshot: a scan."""
        found = self._read_snapshot(key, principal)
        if found is None:
            return []
        rows = [to_stored(r) for r in found[2]]
        if query.speaker != "all":
            rows = [m for m in rows if m.role == query.speaker]
        chosen = list(range(len(rows)))
        if query.index is not None:
            i = query.index + len(rows) if query.index < 0 else query.index
            chosen = [i] if 0 <= i < len(rows) else []
        elif query.time_range is not None:
            start, end = query.time_range
            chosen = [i for i in chosen if start <= rows[i].created_at <= end]
        if query.limit is not None:
            chosen = chosen[: query.limit]
        return [
            TranscriptMessage(i, rows[i].role, rows[i].content, rows[i].id, rows[i].created_at)
            for i in chosen
        ]

    @off_loop
    def _recent(self, key: ConversationKey, principal: str, limit: int) -> list[StoredMessage]:
        """The last ``limit`` user/assistant messages, scanning back from one snapshot."""
        for _ in range(READ_ATTEMPTS):
            snapshot = self._readable(key, principal)
            if snapshot is None:
                return []
            _, conv = snapshot
            found: list[StoredMessage] = []
            end = int(conv["n"])
            while end > 0 and len(found) < limit:
                start = max(0, end - max(limit, 32))
                rows = self._rows(key, conv, list(range(start, end)))
                if rows is None:
                    break
                found[:0] = [m for m in map(to_stored, rows) if m.role in ("user", "assistant")]
                end = start
            else:
                return found[-limit:]
        return []

    def _guess(self, key: ConversationKey, index: int) -> tuple[int, str] | None:
        """``(position, message object)`` of ``index`` by the version of the header this
        bundle saw last, when that puts it outside the window (None otherwise)."""
        cached = self.root.cached(key) if self.runner.concurrent else None
        conv = head_conv(cached[1]) if cached is not None else None
        if conv is None:
            return None
        position = index + int(conv["n"]) if index < 0 else index
        if not 0 <= position < pending_start(conv):
            return None
        return position, message_name(self.root.key_dir(key), run_of(conv, position), position)

    @off_loop
    def _one(self, key: ConversationKey, principal: str, index: int) -> list[TranscriptMessage]:
        """Read by index: the header, then one GET computed from the position. When the
        header this bundle saw last puts the message outside the window, that GET goes
        together with the header's read, and counts only if the header read says the
        same object (message objects never change once written)."""
        guess = self._guess(key, index)
        for _ in range(READ_ATTEMPTS):
            guessed: Any = None
            if guess is not None:
                done = self.runner.together(
                    [
                        functools.partial(self._readable, key, principal),
                        functools.partial(self.root.io.get, guess[1]),
                    ]
                )
                found = done[0].result()
                guessed = done[1].result()
            else:
                found = self._readable(key, principal)
            if found is None:
                return []
            _, conv = found
            position = index + int(conv["n"]) if index < 0 else index
            if not 0 <= position < int(conv["n"]):
                return []
            transcript = Transcript(self.root.io, key)
            row = None
            if (
                guess is not None
                and guessed is not None
                and guess[0] == position < pending_start(conv)
                and guess[1] == message_name(transcript.kdir, run_of(conv, position), position)
            ):
                row = loads(guessed[0], "a message object")
            if row is None:
                row = transcript.row(conv, position)
            if row is not None:
                m = to_stored(row)
                return [TranscriptMessage(position, m.role, m.content, m.id, m.created_at)]
            guess = None
        return []

    @off_loop
    def _get_conversation(self, key: ConversationKey, principal: str) -> ConversationInfo | None:
        found = self._readable(key, principal)
        return None if found is None else _info(key, *found)

    def _headers(self, digests: list[str]) -> list[tuple[ConversationKey, Head, Conv]]:
        """The live conversations among key digests (missing or erased ones dropped)."""
        root = self.root
        now = root.now_us()

        def load(digest: str) -> tuple[ConversationKey, Head, Conv] | None:
            got = root.io.get(f"k/{digest}/h")
            if got is None:
                return None
            from .header import loads

            h = loads(got[0], "a key header")
            conv = head_conv(h)
            if root.status(h, now) != LIVE or conv is None:
                return None
            return ConversationKey.from_storage_name(h["key"]), h, conv

        return [item for item in self.runner.map(load, digests) if item is not None]

    def _owned_by(self, tenant: str, owner: str) -> list[tuple[ConversationKey, Head, Conv]]:
        prefix = self.root.owner_dir(tenant, owner)
        digests = [name[len(prefix) :] for name in self.root.io.list(prefix)]
        return [
            item
            for item in self._headers(digests)
            if item[0].tenant == tenant and item[1]["owner"] == owner
        ]

    @off_loop
    def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        after = kit.decode_cursor(cursor) if cursor is not None else None
        mine = sorted(
            (
                (conv["u"], key.session_id, key, h, conv)
                for key, h, conv in self._owned_by(tenant, principal)
            ),
            key=lambda item: (item[0], item[1]),
            reverse=True,
        )
        mine = [item for item in mine if kit.after_cursor(item[0], item[1], after)]
        page = mine[:limit]
        items = [_info(key, h, conv) for _, _, key, h, conv in page]
        next_cursor = None
        if len(mine) > limit and page:
            next_cursor = kit.encode_cursor(page[-1][0], page[-1][1])
        return Page(items, next_cursor)

    @off_loop
    def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        root = self.root
        digests = sorted({name.rsplit("/", 1)[1] for name in root.io.list("o/")})
        live = self._headers(digests)
        now = root.now_us()
        if isinstance(rule, OverCap):
            groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
            for key, h, conv in live:
                groups.setdefault((key.tenant, h["owner"]), []).append((conv["u"], key.session_id))
            for ranked in groups.values():
                ranked.sort(reverse=True)
            chosen = [
                (conv["u"], key.session_id, key)
                for key, h, conv in live
                if groups[(key.tenant, h["owner"])].index((conv["u"], key.session_id)) >= rule.keep
            ]
        else:
            chosen = [
                (conv["u"], key.session_id, key)
                for key, h, conv in live
                if self._matches(key, h, conv, rule, now)
            ]
        chosen.sort(key=lambda item: (item[0], item[1]))
        return [key for _, _, key in chosen[:limit]]


__all__ = ["S3ConversationStore", "pending_start"]
