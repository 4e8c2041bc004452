"""ConversationStore on Redis.

The transcript's layout keeps every per-message operation independent of its length:
``message_ids`` (message id -> seq) makes appends idempotent; the records are partitioned
by role into ``user_records``, ``assistant_records`` and ``other_records``, sorted sets
scored by seq, so a message by seq, a speaker's k-th message and the recent turns are
O(log n) slices; ``by_time`` (created_at, seq) maps a time range to a seq range,
``compaction_seqs`` finds the latest compaction.

The hot reads (recent turns, the tail with the metadata, a speaker's k-th message) are
one ``MULTI``/``EXEC`` of plain reads: the header fields the read rule needs, the server
clock and the slices, one atomic snapshot in one round trip, the rule applied here
(:func:`_may_read`). The other reads are read-only scripts. A conversation still holding
the previous layout (see ``scripts/include/legacy_layout.lua``) is converted by
``conv_upgrade`` when a read finds it, then read again.

Listing and sweeping read the indexes across conversations of :mod:`.index`, updated
right after each write here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from agentstores.errors import Refusal, UsageError, refusal_error
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
    MAX_CONVERSATION_METADATA_BYTES,
    UNSET,
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
)
from agentstores.stores.kit import (
    UNIX_EPOCH,
    decode_cursor,
    encode_cursor,
    from_micros,
    to_micros,
)

from ._base import Context, RedisStoreBase, claim_args, epoch_arg, raise_for, text
from .client import EncodableT, NotDurable, Script, Uncertain
from .index import ConversationIndexes
from .keys import ConvKeys
from .lua import (
    CONV_APPEND,
    CONV_BRANCH,
    CONV_ERASE,
    CONV_INFO,
    CONV_MESSAGES,
    CONV_METADATA,
    CONV_PREFIX,
    CONV_SHARE,
    CONV_STATUS,
    CONV_TITLE,
    CONV_TRANSCRIPT,
    CONV_TRUNCATE,
    CONV_UPGRADE,
)
from .metadata import StoredInfo, parse_info, read_infos

_MICROSECOND = timedelta(microseconds=1)


def _body(m: EncodedMessage) -> bytes:
    """``[role, content, metadata, compaction]`` from the already-encoded JSON parts."""
    flag = b"true" if m.message.compaction else b"false"
    role = m.message.role.encode()
    return b'["' + role + b'",' + m.content_json + b"," + m.metadata_json + b"," + flag + b"]"


def _split(raw: bytes) -> tuple[bytes, str, bytes]:
    """``(created_us as digits, message id, body)`` of a stored record (the id may hold
    ``|``: its length comes first)."""
    created, n, rest = raw.split(b"|", 2)
    k = int(n)
    return created, rest[:k].decode("utf-8"), rest[k:]


_NEW = object.__new__
_SETTERS = tuple(
    getattr(StoredMessage, name).__set__
    for name in ("id", "role", "content", "metadata", "compaction", "seq", "created_at")
)
if [f.name for f in dataclasses.fields(StoredMessage)] != [
    "id",
    "role",
    "content",
    "metadata",
    "compaction",
    "seq",
    "created_at",
] or hasattr(StoredMessage, "__post_init__"):  # pragma: no cover - a model change
    raise RuntimeError("StoredMessage changed: update _stored_many's field setters")


def _stored_many(seqs: Sequence[bytes | int], records: Sequence[bytes]) -> list[StoredMessage]:
    """The messages of the records at ``seqs``, their bodies parsed by one ``json.loads``
    over all of them (a call per message costs more than the parse).

    Every read of messages ends here, once per message, so the records are split in a
    comprehension and each message is built by setting its slots directly: the frozen
    dataclass's ``__init__`` (an ``object.__setattr__`` call per field) costs nearly as
    much as the parse. ``compaction`` is the JSON boolean the append wrote."""
    if not records:
        return []
    parts = [raw.split(b"|", 2) for raw in records]
    parsed = json.loads(b"[" + b",".join([rest[int(n) :] for _, n, rest in parts]) + b"]")
    moment, new = _moment, _NEW
    set_id, set_role, set_content, set_metadata, set_compaction, set_seq, set_created = _SETTERS
    out: list[StoredMessage] = []
    add = out.append
    for seq, (created, n, rest), (role, content, metadata, compaction) in zip(
        seqs, parts, parsed, strict=True
    ):
        m = new(StoredMessage)
        set_id(m, rest[: int(n)].decode("utf-8"))
        set_role(m, role)
        set_content(m, content)
        set_metadata(m, metadata)
        set_compaction(m, compaction)
        set_seq(m, int(seq))
        set_created(m, moment(created))
        add(m)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _moment(created_us: bytes) -> datetime:
    """A stored ``created_at`` from its digits: the same few recent messages are read
    again and again (every turn reloads them), and building the datetime costs more than
    this lookup."""
    return UNIX_EPOCH + timedelta(microseconds=int(created_us))


def _md_args(updates: MetadataUpdate) -> list[str | bytes]:
    """The scripts' metadata arguments: the pair count, then each name and its encoded
    value (empty: remove the name; an encoded value is never empty)."""
    out: list[str | bytes] = [str(len(updates))]
    for name, raw in updates.items():
        out += [name, b"" if raw is None else raw]
    return out


def _tail_condition(request: AppendRequest) -> tuple[str, str | None]:
    """The append script's tail mode and the expected tail id: ``U`` no condition, ``N``
    the transcript must be empty, ``I`` its tail must be the given id."""
    if isinstance(request.expected_tail, str):
        return "I", request.expected_tail
    return ("U" if request.expected_tail is UNSET else "N"), None


class RedisConversationStore(RedisStoreBase, ConversationStore):
    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.indexes = ConversationIndexes(ctx.client, ctx.keys)

    def _key_names(self, key: ConversationKey) -> ConvKeys:
        return self.ctx.keys.conv(key)

    # --- writes ---------------------------------------------------------------------

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        names = self._key_names(key)
        mode, expected = _tail_condition(request)
        expires_us = None if request.expires_at is None else to_micros(request.expires_at)
        args = claim_args(
            principal,
            key,
            "1" if request.create_if_absent else "0",
            request.last_turn_status or "",
            mode,
            expected or "",
            epoch_arg(request.epoch),
            "" if request.title is None else "=" + request.title,
            "" if expires_us is None else str(expires_us),
            str(self.ctx.tombstone_ttl_ms),
            str(self.ctx.expiry_grace_us),
            str(len(request.messages)),
        )
        for m in request.messages:
            args += [m.message.id, m.message.role, "1" if m.message.compaction else "0", _body(m)]
        args += [str(MAX_CONVERSATION_METADATA_BYTES), *_md_args(request.metadata or {})]
        reply = await self._write(
            CONV_APPEND, [*names.all, *names.wake], args, from_result=lambda r: [b"ok", r]
        )
        if reply[0] == b"noop":
            return []
        raise_for(reply, key, epoch=request.epoch, expected=expected)
        first_s, created_s, _is_new, updated_s, positions = text(reply[1]).split("|")
        first, updated_us = int(first_s), int(updated_s)
        appended = (
            range(len(request.messages))
            if positions == "*"
            else [int(p) for p in positions.split(",") if p]
        )
        created_at = from_micros(created_s)
        stored = []
        for offset, i in enumerate(appended):
            m = request.messages[i]
            stored.append(
                StoredMessage(
                    id=m.message.id,
                    role=m.message.role,
                    content=json.loads(m.content_json),
                    metadata=json.loads(m.metadata_json),
                    compaction=m.message.compaction,
                    seq=first + offset,
                    created_at=created_at,
                )
            )
        await self.indexes.touch(key, principal, updated_us, expires_us)
        return stored

    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        args = claim_args(principal, key, status, epoch_arg(epoch))
        reply = await self._write(
            CONV_STATUS, self._key_names(key).all, args, from_result=lambda r: [b"ok", b"1", r]
        )
        raise_for(reply, key, epoch=epoch)
        if reply[1] == b"1":
            await self.indexes.touch(key, principal, int(reply[2]))

    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        title_arg = "" if title is None else "=" + title
        args = claim_args(principal, key, title_arg, epoch_arg(epoch))
        reply = await self._write(
            CONV_TITLE, self._key_names(key).all, args, from_result=lambda r: [b"ok", b"1", r]
        )
        raise_for(reply, key, epoch=epoch)
        await self.indexes.touch(key, principal, int(reply[2]))

    async def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        args = claim_args(principal, key, epoch_arg(epoch), str(MAX_CONVERSATION_METADATA_BYTES))
        args += _md_args(updates)
        reply = await self._write(
            CONV_METADATA, self._key_names(key).all, args, from_result=lambda r: [b"ok", b"1", r]
        )
        raise_for(reply, key, epoch=epoch)
        await self.indexes.touch(key, principal, int(reply[2]))

    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        args = [principal, with_principal, "1" if shared else "0"]
        reply = await self._write(
            CONV_SHARE, self._key_names(key).all, args, from_result=lambda _r: [b"ok", b"1"]
        )
        raise_for(reply, key)

    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        args = claim_args(principal, key, message_id, epoch_arg(epoch), cut, expected_tail or "")
        names = self._key_names(key)
        reply = await self._write(
            CONV_TRUNCATE,
            [*names.all, *names.wake],
            args,
            from_result=lambda r: [b"ok", *r.split(b"|")],
        )
        if reply[0] == b"no_message":
            raise _no_message(key, message_id)
        raise_for(reply, key, epoch=epoch, expected=expected_tail)
        await self.indexes.touch(key, principal, int(reply[2]))
        return int(reply[1])

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        names = self._key_names(key)
        reply = await self._read_script(
            names,
            CONV_PREFIX,
            [
                names.header,
                names.meta,
                names.message_ids,
                names.legacy_records,
                names.user_records,
                names.assistant_records,
                names.other_records,
            ],
            [principal, message_id],
        )
        if reply[0] == b"no_message":
            raise _no_message(key, message_id)
        raise_for(reply, key)
        title, records, md = reply[1], reply[2], reply[3]
        args = claim_args(
            principal, new_key, b"" if title is None else b"=" + title, str(len(records))
        )
        for raw in records:
            _, _, body = _split(raw)
            role = body[2 : body.index(b'"', 2)]
            compaction = b"1" if body.endswith(b"true]") else b"0"
            args += [uuid.uuid4().hex, role, compaction, body]
        args += [str(len(md) // 2), *md]
        reply = await self._write(
            CONV_BRANCH, self._key_names(new_key).all, args, from_result=lambda r: [b"ok", r]
        )
        if reply[0] == b"exists":
            raise refusal_error(Refusal.EXISTS, "the branch's key is already in use", key=new_key)
        raise_for(reply, new_key)
        await self.indexes.touch(new_key, principal, int(reply[1]))

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        names = self._key_names(key)
        ttl = str(self.ctx.tombstone_ttl_ms)
        if principal is not None:
            mode, who, param = "owner", principal, ""
        elif isinstance(rule, Expired):
            mode, who, param = "expired", "", ""
        elif isinstance(rule, IdleFor):
            mode, who, param = "idle", "", str(rule.duration // _MICROSECOND)
        elif isinstance(rule, OverCap):
            (info,) = await read_infos(self.ctx.client, self.ctx.keys, [key])
            if info.status != "ok" or not await self.indexes.is_over_cap(info, rule.keep):
                return False
            mode, who, param = "overcap", info.owner, text(info.updated_raw)
        else:
            raise UsageError(f"unknown sweep rule {rule!r}")
        reply = await self._write(
            CONV_ERASE,
            [*names.all, *names.wake],
            [mode, who, param, ttl],
            from_result=lambda _r: [b"ok", b"1", None],
        )
        raise_for(reply, key)
        if reply[1] != b"1":
            return False
        owner = reply[2]
        if owner is None:  # reconciled: the tombstone remembers the erased owner
            owner = await self.ctx.client.command(
                names.header, "HGET", names.header, "erased_owner"
            )
        if owner is not None:
            await self.indexes.drop(key, text(owner))
        return True

    # --- reads ----------------------------------------------------------------------

    async def _visible(
        self, names: ConvKeys, principal: str, reads: Sequence[tuple[EncodableT, ...]]
    ) -> list[Any] | None:
        """The replies of the plain ``reads``, in one ``MULTI``/``EXEC`` behind the header
        fields and the server clock that decide whether ``principal`` may read (the
        scripts' ``can_read``: an owner, not erased, before a temporary conversation's
        drop deadline, and the principal its owner or shared with); None when not, which
        the caller answers exactly as an absent conversation."""
        header, clock, *replies = await self.ctx.client.transaction(
            names.header,
            [
                (
                    "HMGET",
                    names.header,
                    "owner",
                    "erased_at",
                    "drop_at",
                    "shared:" + principal,
                ),
                _TIME,
                *reads,
            ],
        )
        owner, erased_at, drop_at, shared = header
        if not _may_read(owner, erased_at, drop_at, shared is not None, clock, principal):
            return None
        return replies

    async def _upgrade(self, names: ConvKeys) -> None:
        """Convert a conversation a read found in the previous layout (idempotent: a lost
        reply is settled by reading again)."""
        with contextlib.suppress(Uncertain, NotDurable):
            await self.ctx.client.write(CONV_UPGRADE, names.all, ())

    async def _read_script(
        self, names: ConvKeys, script: Script, keys: list[str], args: list[EncodableT]
    ) -> Any:
        """A read-only script, run again after converting a previous-layout conversation
        it replied ``legacy`` for."""
        reply = await self.ctx.client.read(script, keys, args)
        if reply == _LEGACY:
            await self._upgrade(names)
            reply = await self.ctx.client.read(script, keys, args)
            if reply == _LEGACY:
                raise RuntimeError(f"{script.name}: the conversation was not converted")
        return reply

    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        names = self._key_names(key)
        if query.index is not None and query.speaker in ("user", "assistant"):
            return await self._speaker_message(names, principal, query.speaker, query.index)
        if query.index is not None:
            mode, arg, t0, t1 = "index", str(query.index), "", ""
        elif query.time_range is not None:
            mode, arg = "time", ""
            t0, t1 = str(to_micros(query.time_range[0])), str(to_micros(query.time_range[1]))
        else:
            mode, arg, t0, t1 = "all", "", "", ""
        limit = -1 if query.limit is None else query.limit
        reply = await self._read_script(
            names,
            CONV_TRANSCRIPT,
            [
                names.header,
                names.meta,
                names.legacy_records,
                names.by_time,
                names.user_records,
                names.assistant_records,
                names.other_records,
            ],
            [principal, query.speaker, mode, arg, t0, t1, limit],
        )
        return [_transcript_message(reply[i], reply[i + 1]) for i in range(0, len(reply), 2)]

    async def _speaker_message(
        self, names: ConvKeys, principal: str, speaker: str, index: int
    ) -> list[TranscriptMessage]:
        """A speaker's message at ``index`` (negative: from the end; the first user
        message is index 0): its sorted set's slice at that rank, plus the set's size
        for a negative index, in one atomic snapshot."""
        records = names.user_records if speaker == "user" else names.assistant_records
        reads: list[tuple[EncodableT, ...]] = [("ZRANGE", records, index, index, "WITHSCORES")]
        if index < 0:
            reads.append(("ZCARD", records))
        for _attempt in range(2):
            replies = await self._visible(names, principal, reads)
            if replies is None or not replies[0]:
                return []
            record = replies[0][0]
            if b"|" not in record:  # a previous-layout seq: convert, then read again
                await self._upgrade(names)
                continue
            position = index if index >= 0 else int(replies[1]) + index
            return [_transcript_message(position, record)]
        raise RuntimeError("the conversation was not converted")

    async def _messages(
        self, key: ConversationKey, principal: str, mode: str, x: int = 0, y: int = 0
    ) -> list[StoredMessage]:
        names = self._key_names(key)
        reply = await self._read_script(
            names,
            CONV_MESSAGES,
            [
                names.header,
                names.meta,
                names.legacy_records,
                names.user_records,
                names.assistant_records,
                names.other_records,
                names.compaction_seqs,
            ],
            [principal, mode, x, y],
        )
        return _stored_many(reply[0::2], reply[1::2])

    async def _recent(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        """The last ``limit`` user/assistant messages: the last ``limit`` of each speaker's
        sorted set, merged by seq here, in one atomic snapshot with the read rule."""
        names = self._key_names(key)
        reads: list[tuple[EncodableT, ...]] = [
            ("ZRANGE", names.user_records, -limit, -1, "WITHSCORES"),
            ("ZRANGE", names.assistant_records, -limit, -1, "WITHSCORES"),
        ]
        for _attempt in range(2):
            replies = await self._visible(names, principal, reads)
            if replies is None:
                return []
            users, assistants = replies
            if (users and b"|" not in users[0]) or (assistants and b"|" not in assistants[0]):
                await self._upgrade(names)  # previous-layout seqs: convert, read again
                continue
            return _stored_many(*_last_merged(users, assistants, limit))
        raise RuntimeError("the conversation was not converted")

    async def _tail(
        self, key: ConversationKey, principal: str, limit: int
    ) -> ConversationTail | None:
        """The metadata and the last ``limit`` rows of any role in one ``MULTI``/``EXEC``:
        both hashes whole (what ``conv_info`` reads), the server clock and the last
        ``limit`` of each role's sorted set. The rows from ``count - limit`` on (the count
        the metadata names) are picked from those here and the read rule is judged on the
        same snapshot, as ``_visible`` does."""
        names = self._key_names(key)
        reads: list[tuple[EncodableT, ...]] = [
            ("HGETALL", names.header),
            _TIME,
            ("HGETALL", names.meta),
            ("EXISTS", names.legacy_records),
        ]
        if limit:  # ZRANGE -0 -1 would be the whole set
            for records in (names.user_records, names.assistant_records, names.other_records):
                reads.append(("ZRANGE", records, -limit, -1, "WITHSCORES"))
        for _attempt in range(2):
            header, clock, meta, legacy, *slices = await self.ctx.client.transaction(
                names.header, reads
            )
            h = dict(zip(header[0::2], header[1::2], strict=True))
            shared = b"shared:" + principal.encode() in h
            if not _may_read(
                h.get(b"owner"), h.get(b"erased_at"), h.get(b"drop_at"), shared, clock, principal
            ):
                return None
            if legacy:
                await self._upgrade(names)  # the previous layout: convert, read again
                continue
            info = _tail_info(h, meta, clock, key)
            if info is None:
                return None
            start = max(0, info.count - limit)
            return ConversationTail(
                info.public(), _stored_many(*_rows_from(slices, start, info.count))
            )
        raise RuntimeError("the conversation was not converted")

    async def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        return await self._messages(key, principal, "history")

    async def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        return await self._messages(key, principal, "range", start, -1 if limit is None else limit)

    async def _get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None:
        names = self._key_names(key)
        reply = await self.ctx.client.read(CONV_INFO, [names.header, names.meta], [principal, "0"])
        info = parse_info(reply, key)
        return info.public() if info.status == "ok" else None

    # --- listing and sweeping (the indexes across conversations) -------------------

    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        await self.indexes.flush()
        after = None if cursor is None else decode_cursor(cursor)
        found = await self.indexes.owned(tenant, principal, after, limit + 1)
        page = found[:limit]
        next_cursor = None
        if len(found) > limit and page:
            last = page[-1]
            assert last.key is not None
            next_cursor = encode_cursor(last.updated_us, last.key.session_id)
        return Page([i.public() for i in page], next_cursor)

    async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        return await self.indexes.sweepable(rule, limit)

    async def repair_indexes(self) -> int:
        """Re-add every live conversation to the listing and sweeper indexes (after a
        process died between a write and its index step). Returns how many were seen."""
        return await self.indexes.rebuild()


_TIME: tuple[EncodableT, ...] = ("TIME",)
_LEGACY = [b"legacy"]
"""A read script's reply for a conversation still in the previous layout."""


def _may_read(
    owner: bytes | None,
    erased_at: bytes | None,
    drop_at: bytes | None,
    shared: bool,
    clock: Sequence[bytes],
    principal: str,
) -> bool:
    """The scripts' ``can_read`` on header fields and a ``TIME`` reply: an owner, not
    erased, before a temporary conversation's drop deadline, and the principal its owner
    or shared with."""
    if owner is None or erased_at is not None:
        return False
    if drop_at is not None and int(drop_at) <= int(clock[0]) * 1_000_000 + int(clock[1]):
        return False
    return shared or owner == principal.encode()


def _tail_info(
    header: dict[bytes, bytes], meta: list[bytes], clock: Sequence[bytes], key: ConversationKey
) -> StoredInfo | None:
    """What ``conv_info`` replies for a visible conversation, from its header and meta
    hashes read whole (:func:`.metadata.parse_info` builds both); None when it has no
    metadata (``conv_info``'s absent)."""
    m = dict(zip(meta[0::2], meta[1::2], strict=True))
    created = m.get(b"created_at")
    if created is None:
        return None
    shared = [name[7:] for name in header if name.startswith(b"shared:")]
    md: list[bytes] = []
    for name, value in m.items():
        if name.startswith(b"md:"):
            md += (name[3:], value)
    now = int(clock[0]) * 1_000_000 + int(clock[1])
    get = m.get
    return parse_info(
        [
            now,
            b"ok",
            header[b"owner"],
            created,
            get(b"updated_at"),
            get(b"title"),
            get(b"expires_at"),
            get(b"status"),
            get(b"tail"),
            get(b"count"),
            shared,
            header.get(b"tenant"),
            header.get(b"session_id"),
            md,
        ],
        key,
    )


def _rows_from(slices: Sequence[list[bytes]], start: int, count: int) -> tuple[range, list[bytes]]:
    """``(seqs, records)`` of the rows ``start .. count - 1`` out of ``ZRANGE ...
    WITHSCORES`` replies of the last rows of each role (seqs are dense and each in one
    set, so each reply holds all of its rows in that span): each reply is walked from its
    end only as far as the span, and each record put at its seq."""
    records: list[bytes | None] = [None] * (count - start)
    for rows in slices:
        k = len(rows) - 1
        while k > 0:
            seq = int(rows[k])
            if seq < start:
                break
            records[seq - start] = rows[k - 1]
            k -= 2
    if None in records:
        raise RuntimeError("the records do not match the count the metadata names")
    return range(start, count), records  # type: ignore[return-value]  # no None left


def _transcript_message(position: bytes | int, record: bytes) -> TranscriptMessage:
    created, mid, body = _split(record)
    role, content, _metadata, _compaction = json.loads(body)
    return TranscriptMessage(int(position), role, content, mid, _moment(created))


def _last_merged(
    users: list[bytes], assistants: list[bytes], limit: int
) -> tuple[Sequence[bytes | int], Sequence[bytes]]:
    """``(seqs, records)``, ascending, of the last ``limit`` of two ``ZRANGE ...
    WITHSCORES`` replies (each ascending by seq, a seq in only one of them), merged from
    their ends."""
    if not assistants or not users:  # one speaker: already the last ``limit``
        rows = users or assistants
        return rows[1::2], rows[0::2]
    u_seqs, a_seqs = users[1::2], assistants[1::2]
    i, j = len(u_seqs), len(a_seqs)
    u, a = int(u_seqs[-1]), int(a_seqs[-1])
    seqs: list[int] = []
    records: list[bytes] = []
    for _ in range(min(limit, i + j)):
        if u > a:
            i -= 1
            seqs.append(u)
            records.append(users[2 * i])
            u = int(u_seqs[i - 1]) if i else -1
        else:
            j -= 1
            seqs.append(a)
            records.append(assistants[2 * j])
            a = int(a_seqs[j - 1]) if j else -1
    seqs.reverse()
    records.reverse()
    return seqs, records


def _no_message(key: ConversationKey, message_id: str) -> Exception:
    return refusal_error(
        Refusal.NOT_FOUND, f"no message {message_id!r} in this conversation", key=key
    )
