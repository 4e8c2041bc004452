"""ConversationStore on Redis.

The transcript's layout keeps every per-message operation independent of its length:
``ids`` (message id -> seq) makes appends idempotent, ``msg`` (seq -> record) reads one
message by position, ``u``/``a`` (seqs of user / assistant messages) find the k-th
message of one speaker and the recent turns in O(log n), ``t`` (created_at, seq) maps a
time range to a seq range, ``cp`` finds the latest compaction.

Listing and sweeping need indexes across conversations; on a cluster those live in
other slots, so no script can update them together with the conversation. They are
updated in a second, idempotent step right after each write (retried later in this
process when that step fails), and every entry read from them is checked against the
conversation's own header and metadata before it is used: a stale entry is repaired or
dropped, never returned. See README.md for what a process killed between the two steps
leaves behind.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agentstores.errors import ConflictError, NotFoundError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import (
    ConversationInfo,
    LastTurnStatus,
    Page,
    StoredMessage,
    TranscriptMessage,
)
from agentstores.stores import (
    UNSET,
    AppendRequest,
    ConversationStore,
    EncodedMessage,
    Expired,
    IdleFor,
    OverCap,
    SweepRule,
    TranscriptQuery,
)

from ._base import RedisStoreBase, ep, from_us, nonce, raise_for, text, to_us
from .client import Call, EncodableT
from .keys import SHARDS, ConvKeys, decode_owner_name
from .lua import (
    CONV_APPEND,
    CONV_BRANCH,
    CONV_ERASE,
    CONV_INFO,
    CONV_MESSAGES,
    CONV_PREFIX,
    CONV_SHARE,
    CONV_STATUS,
    CONV_TITLE,
    CONV_TRANSCRIPT,
    CONV_TRUNCATE,
    IX_FIX,
    IX_PAGE,
)

log = logging.getLogger(__name__)

_SLACK = 4
"""Index entries fetched beyond what a listing still needs (stale ones are skipped)."""
_RESTARTS = 8
"""How often one listing restarts after repairing stale entries before it settles."""
_US_DELTA = timedelta(microseconds=1)
_MAX_PENDING = 100_000
"""Deferred index updates kept in memory; beyond it the oldest are dropped (with a warning
that repair_indexes() rebuilds what they would have written)."""


@dataclass(frozen=True)
class Info:
    """A conversation's metadata as the store holds it (``up`` kept exact, in µs)."""

    status: str
    now: int
    key: ConversationKey | None = None
    owner: str = ""
    created: int = 0
    up: int = 0
    up_raw: bytes = b""
    title: str | None = None
    expires: int | None = None
    last_status: str | None = None
    tail: str | None = None
    count: int = 0
    shared: frozenset[str] = frozenset()

    def public(self) -> ConversationInfo:
        assert self.key is not None
        return ConversationInfo(
            key=self.key,
            owner=self.owner,
            title=self.title,
            created_at=from_us(self.created),
            updated_at=from_us(self.up),
            expires_at=None if self.expires is None else from_us(self.expires),
            last_turn_status=self.last_status,  # type: ignore[arg-type]
            tail_message_id=self.tail,
            message_count=self.count,
            shared_with=self.shared,
        )


def _info(reply: list[Any], key: ConversationKey | None = None) -> Info:
    now = int(reply[0])
    status = text(reply[1])
    if status == "expired":
        return Info(status, now, key, owner=text(reply[2]) if reply[2] else "")
    if status != "ok":
        return Info(status, now, key)
    owner, cr, up, ti, x, st, tail, n, shared, tn, sd = reply[2:13]
    if key is None and tn is not None and sd is not None:
        key = ConversationKey(text(tn), text(sd))
    return Info(
        status="ok",
        now=now,
        key=key,
        owner=text(owner),
        created=int(cr),
        up=int(up),
        up_raw=up,
        title=None if ti is None else text(ti),
        expires=None if x is None else int(x),
        last_status=None if st is None else text(st),
        tail=None if tail is None else text(tail),
        count=int(n or 0),
        shared=frozenset(text(s) for s in shared),
    )


def _body(m: EncodedMessage) -> bytes:
    """``[role, content, metadata, compaction]`` from the already-encoded JSON parts."""
    flag = b"true" if m.message.compaction else b"false"
    role = m.message.role.encode()
    return b'["' + role + b'",' + m.content_json + b"," + m.metadata_json + b"," + flag + b"]"


def _split(raw: bytes) -> tuple[int, str, bytes]:
    """``(created_us, message id, body)`` of a stored record."""
    i = raw.index(b"|")
    j = raw.index(b"|", i + 1)
    n = int(raw[i + 1 : j])
    return int(raw[:i]), raw[j + 1 : j + 1 + n].decode("utf-8"), raw[j + 1 + n :]


def _stored(seq: int, raw: bytes) -> StoredMessage:
    created, mid, body = _split(raw)
    role, content, metadata, compaction = json.loads(body)
    return StoredMessage(
        id=mid,
        role=role,
        content=content,
        metadata=metadata,
        compaction=bool(compaction),
        seq=seq,
        created_at=from_us(created),
    )


def _encode_cursor(up: int, session_id: str) -> str:
    raw = json.dumps([up, session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        up, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return int(up), str(session_id)
    except Exception as exc:
        raise UsageError("cursor is not one this store produced") from exc


def _after(score: int, member: bytes, cursor: tuple[int, bytes] | None) -> bool:
    """Whether ``(score, member)`` comes strictly after ``cursor`` in newest-first order."""
    if cursor is None:
        return True
    return score < cursor[0] or (score == cursor[0] and member < cursor[1])


class RedisConversationStore(RedisStoreBase, ConversationStore):
    # --- helpers --------------------------------------------------------------------

    def _k(self, key: ConversationKey) -> ConvKeys:
        return self.ctx.keys.conv(key)

    async def _infos(self, keys: Sequence[ConversationKey]) -> list[Info]:
        """Admin view (no principal) of many conversations, one pipelined round trip."""
        calls: list[Call] = []
        for key in keys:
            k = self._k(key)
            calls.append((CONV_INFO, [k.h, k.m], ["", "1"]))
        replies = await self.ctx.client.many(calls)
        out = []
        for key, reply in zip(keys, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            out.append(_info(reply, key))
        return out

    def _touch_calls(self, key: ConversationKey, owner: str, up: int) -> list[Call]:
        ks = self.ctx.keys
        ix = ks.owner_index(key.tenant, owner)
        idle = ks.idle(ks.shard_of(key))
        reg = ks.owner_registry(ks.owner_shard(key.tenant, owner))
        return [
            (None, [ix], ("ZADD", ix, "GT", up, key.session_id)),
            (None, [idle], ("ZADD", idle, "GT", up, ks.member(key))),
            (None, [reg], ("SADD", reg, ks.owner_name(key.tenant, owner))),
        ]

    def _drop_calls(self, key: ConversationKey, owner: str) -> list[Call]:
        ks = self.ctx.keys
        ix = ks.owner_index(key.tenant, owner)
        idle = ks.idle(ks.shard_of(key))
        exp = ks.expiring(ks.shard_of(key))
        return [
            (None, [ix], ("ZREM", ix, key.session_id)),
            (None, [idle], ("ZREM", idle, ks.member(key))),
            (None, [exp], ("ZREM", exp, ks.member(key))),
        ]

    async def _index(self, calls: list[Call]) -> None:
        """The second step of a write: idempotent index updates. Failures are kept and
        retried before the next listing or sweep in this process."""
        try:
            results: list[Any] = await self.ctx.client.many(calls)
        except Exception as exc:
            results = [exc] * len(calls)
        failed = [c for c, r in zip(calls, results, strict=True) if isinstance(r, Exception)]
        if failed:
            pending = self.ctx.pending_index
            pending.extend(failed)
            if len(pending) > _MAX_PENDING:
                del pending[: len(pending) - _MAX_PENDING]
                log.warning(
                    "agentstores-redis: deferred index updates dropped; run repair_indexes()"
                )
            log.warning("agentstores-redis: %d index updates deferred", len(failed))

    async def flush_index(self) -> None:
        """Retry deferred index updates (called before listings and sweeps)."""
        if not self.ctx.pending_index:
            return
        calls, self.ctx.pending_index = self.ctx.pending_index, []
        await self._index(calls)

    async def _fix(self, fixes: list[tuple[str, bytes | str, int, int | None]]) -> None:
        """Conditional index repairs: ``(index, member, seen score, new score or None)``."""
        if not fixes:
            return
        calls: list[Call] = [
            (IX_FIX, [ix], [member, seen, "" if new is None else new])
            for ix, member, seen, new in fixes
        ]
        await self.ctx.client.many(calls)

    # --- writes ---------------------------------------------------------------------

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        messages = list(request.messages)
        create_if_absent, last_turn_status = request.create_if_absent, request.last_turn_status
        expected_last_message_id: Any = request.expected_tail
        epoch, title, expires_at = request.epoch, request.title, request.expires_at
        k = self._k(key)
        n = nonce()
        if expected_last_message_id is UNSET:
            mode, expected = "U", ""
        elif expected_last_message_id is None:
            mode, expected = "N", ""
        else:
            mode, expected = "I", expected_last_message_id
        exp_us = None if expires_at is None else to_us(expires_at)
        args: list[EncodableT] = [
            n,
            principal,
            key.tenant,
            key.session_id,
            "1" if create_if_absent else "0",
            last_turn_status or "",
            mode,
            expected,
            ep(epoch),
            "" if title is None else "=" + title,
            "" if exp_us is None else str(exp_us),
            str(self.ctx.tombstone_ttl_ms),
            str(self.ctx.expiry_grace_us),
            str(len(messages)),
        ]
        for m in messages:
            args += [m.message.id, m.message.role, "1" if m.message.compaction else "0", _body(m)]
        reply = await self._write(
            CONV_APPEND, k.all, args, nonce=n, from_result=lambda r: [b"ok", r]
        )
        code = reply[0]
        if code == b"noop":
            return []
        if code == b"stale":
            from agentstores.errors import StaleWriteError

            tail = text(reply[1]) or None
            raise StaleWriteError(
                f"transcript tail is {tail!r}, expected {expected_last_message_id!r}",
                key=key,
                tail=tail,
            )
        raise_for(reply, key, epoch=epoch)
        first_s, ts_s, _created, up_s, positions = text(reply[1]).split("|")
        first, ts, up = int(first_s), int(ts_s), int(up_s)
        fresh = (
            list(range(len(messages)))
            if positions == "*"
            else [int(p) for p in positions.split(",") if p]
        )
        created_at = from_us(ts)
        stored = []
        for offset, i in enumerate(fresh):
            m = messages[i]
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
        calls = self._touch_calls(key, principal, up)
        if exp_us is not None:
            exp = self.ctx.keys.expiring(self.ctx.keys.shard_of(key))
            calls.append((None, [exp], ("ZADD", exp, exp_us, self.ctx.keys.member(key))))
        await self._index(calls)
        return stored

    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        k = self._k(key)
        n = nonce()
        args = [n, principal, key.tenant, key.session_id, status, ep(epoch)]
        reply = await self._write(
            CONV_STATUS, k.all, args, nonce=n, from_result=lambda r: [b"ok", b"1", r]
        )
        raise_for(reply, key, epoch=epoch)
        if reply[1] == b"1":
            await self._index(self._touch_calls(key, principal, int(reply[2])))

    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        k = self._k(key)
        n = nonce()
        t = "" if title is None else "=" + title
        args = [n, principal, key.tenant, key.session_id, t, ep(epoch)]
        reply = await self._write(
            CONV_TITLE, k.all, args, nonce=n, from_result=lambda r: [b"ok", b"1", r]
        )
        raise_for(reply, key, epoch=epoch)
        await self._index(self._touch_calls(key, principal, int(reply[2])))

    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        k = self._k(key)
        n = nonce()
        args = [n, principal, with_principal, "1" if shared else "0"]
        reply = await self._write(
            CONV_SHARE, k.all, args, nonce=n, from_result=lambda _r: [b"ok", b"1"]
        )
        raise_for(reply, key)

    async def _truncate(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> int:
        k = self._k(key)
        n = nonce()
        args = [n, principal, key.tenant, key.session_id, message_id, ep(epoch)]
        reply = await self._write(
            CONV_TRUNCATE,
            k.all,
            args,
            nonce=n,
            from_result=lambda r: [b"ok", *r.split(b"|")],
        )
        if reply[0] == b"nomessage":
            raise NotFoundError(f"no message {message_id!r} in this conversation", key=key)
        raise_for(reply, key, epoch=epoch)
        await self._index(self._touch_calls(key, principal, int(reply[2])))
        return int(reply[1])

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        k = self._k(key)
        reply = await self.ctx.client.read(
            CONV_PREFIX, [k.h, k.m, k.ids, k.msg], [principal, message_id]
        )
        if reply[0] == b"notfound":
            raise NotFoundError("no such conversation", key=key)
        if reply[0] == b"nomessage":
            raise NotFoundError(f"no message {message_id!r} in this conversation", key=key)
        title, records = reply[1], reply[2]
        nk = self._k(new_key)
        n = nonce()
        args: list[EncodableT] = [
            n,
            principal,
            new_key.tenant,
            new_key.session_id,
            b"" if title is None else b"=" + title,
            str(len(records)),
        ]
        for raw in records:
            _, _, body = _split(raw)
            role = body[2 : body.index(b'"', 2)]
            compaction = b"1" if body.endswith(b"true]") else b"0"
            args += [uuid.uuid4().hex, role, compaction, body]
        reply = await self._write(
            CONV_BRANCH, nk.all, args, nonce=n, from_result=lambda r: [b"ok", r]
        )
        if reply[0] == b"conflict":
            raise ConflictError("the branch's key is already in use", key=new_key)
        raise_for(reply, new_key)
        await self._index(self._touch_calls(new_key, principal, int(reply[1])))

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        k = self._k(key)
        ttl = str(self.ctx.tombstone_ttl_ms)
        if principal is not None:
            mode, who, param = "owner", principal, ""
        elif isinstance(rule, Expired):
            mode, who, param = "expired", "", ""
        elif isinstance(rule, IdleFor):
            mode, who, param = "idle", "", str(rule.duration // _US_DELTA)
        elif isinstance(rule, OverCap):
            (info,) = await self._infos([key])
            if info.status != "ok" or not await self._over_cap(info, rule.keep):
                return False
            mode, who, param = "overcap", info.owner, text(info.up_raw)
        else:
            raise UsageError(f"unknown sweep rule {rule!r}")
        n = nonce()
        reply = await self._write(
            CONV_ERASE,
            k.all,
            [n, mode, who, param, ttl],
            nonce=n,
            from_result=lambda _r: [b"ok", b"1", None],
        )
        raise_for(reply, key)
        if reply[1] != b"1":
            return False
        owner = reply[2]
        if owner is None:  # reconciled: the tombstone remembers the erased owner
            owner = await self.ctx.client.command(k.h, "HGET", k.h, "eo")
        if owner is not None:
            await self._index(self._drop_calls(key, text(owner)))
        return True

    # --- reads ----------------------------------------------------------------------

    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        k = self._k(key)
        if query.index is not None:
            mode, arg, t0, t1 = "index", str(query.index), "", ""
        elif query.time_range is not None:
            mode, arg = "time", ""
            t0, t1 = str(to_us(query.time_range[0])), str(to_us(query.time_range[1]))
        else:
            mode, arg, t0, t1 = "all", "", "", ""
        limit = -1 if query.limit is None else query.limit
        reply = await self.ctx.client.read(
            CONV_TRANSCRIPT,
            [k.h, k.m, k.msg, k.t, k.u, k.a],
            [principal, query.speaker, mode, arg, t0, t1, limit],
        )
        out = []
        for i in range(0, len(reply), 2):
            created, mid, body = _split(reply[i + 1])
            role, content, _metadata, _compaction = json.loads(body)
            out.append(TranscriptMessage(int(reply[i]), role, content, mid, from_us(created)))
        return out

    async def _messages(
        self, key: ConversationKey, principal: str, mode: str, x: int = 0, y: int = 0
    ) -> list[StoredMessage]:
        k = self._k(key)
        reply = await self.ctx.client.read(
            CONV_MESSAGES, [k.h, k.m, k.msg, k.u, k.a, k.cp], [principal, mode, x, y]
        )
        return [_stored(int(reply[i]), reply[i + 1]) for i in range(0, len(reply), 2)]

    async def _recent(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        return await self._messages(key, principal, "recent", limit)

    async def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        return await self._messages(key, principal, "history")

    async def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        return await self._messages(key, principal, "range", start, -1 if limit is None else limit)

    async def _get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None:
        k = self._k(key)
        reply = await self.ctx.client.read(CONV_INFO, [k.h, k.m], [principal, "0"])
        info = _info(reply, key)
        return info.public() if info.status == "ok" else None

    # --- listing --------------------------------------------------------------------

    async def _owned_entries(
        self, tenant: str, owner: str, cursor: tuple[int, bytes] | None, want: int
    ) -> list[Info]:
        """Up to ``want`` of ``owner``'s conversations after ``cursor``, newest first,
        each checked against its own metadata (stale index entries repaired or dropped)."""
        ix = self.ctx.keys.owner_index(tenant, owner)
        for _restart in range(_RESTARTS):
            found: list[Info] = []
            pos = cursor
            repaired = False
            while len(found) < want:
                window = want - len(found) + _SLACK
                raw = await self.ctx.client.read(
                    IX_PAGE, [ix], ["" if pos is None else str(pos[0]), window]
                )
                entries = [
                    (raw[i], int(float(raw[i + 1])))
                    for i in range(0, len(raw), 2)
                    if _after(int(float(raw[i + 1])), raw[i], pos)
                ]
                if not entries:
                    break
                infos = await self._infos([ConversationKey(tenant, text(m)) for m, _ in entries])
                fixes: list[tuple[str, bytes | str, int, int | None]] = []
                for (member, score), info in zip(entries, infos, strict=True):
                    if info.status != "ok" or info.owner != owner:
                        fixes.append((ix, member, score, None))
                    elif info.up != score:
                        fixes.append((ix, member, score, info.up))
                        repaired = True
                    elif not repaired:
                        found.append(info)
                await self._fix(fixes)
                if repaired:
                    break
                pos = entries[-1][1], entries[-1][0]
                if len(raw) // 2 < window:
                    break
            if not repaired:
                return found[:want]
        # concurrent writers kept moving entries: order what was seen by its own metadata
        found.sort(key=lambda i: (i.up, i.key.session_id if i.key else ""), reverse=True)
        return found[:want]

    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        await self.flush_index()
        after: tuple[int, bytes] | None = None
        if cursor is not None:
            up, session_id = _decode_cursor(cursor)
            after = (up, session_id.encode("utf-8"))
        found = await self._owned_entries(tenant, principal, after, limit + 1)
        page = found[:limit]
        next_cursor = None
        if len(found) > limit and page:
            last = page[-1]
            assert last.key is not None
            next_cursor = _encode_cursor(last.up, last.key.session_id)
        return Page([i.public() for i in page], next_cursor)

    # --- sweeping -------------------------------------------------------------------

    async def _over_cap(self, info: Info, keep: int) -> bool:
        """Whether ``info`` is not among its owner's ``keep`` most recent conversations."""
        assert info.key is not None
        if keep == 0:
            return True
        newer = await self._owned_entries(info.key.tenant, info.owner, None, keep)
        me = (info.up, info.key.session_id.encode("utf-8"))
        ahead = [
            i for i in newer if i.key is not None and (i.up, i.key.session_id.encode("utf-8")) > me
        ]
        return len(ahead) >= keep

    async def _shard_candidates(
        self, names: list[str], bound: str, limit: int
    ) -> list[tuple[str, bytes, int]]:
        """``(index, member, score)`` with score <= bound, oldest first, per shard."""
        calls: list[Call] = [
            (None, [n], ("ZRANGEBYSCORE", n, "-inf", bound, "WITHSCORES", "LIMIT", 0, limit))
            for n in names
        ]
        out: list[tuple[str, bytes, int]] = []
        for name, reply in zip(names, await self.ctx.client.many(calls), strict=True):
            if isinstance(reply, Exception):
                raise reply
            out.extend((name, reply[i], int(float(reply[i + 1]))) for i in range(0, len(reply), 2))
        return out

    async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        await self.flush_index()
        if limit == 0:
            return []
        ks = self.ctx.keys
        now = await self.ctx.client.time_us()
        if isinstance(rule, OverCap):
            return await self._find_over_cap(rule.keep, limit)
        expired = isinstance(rule, Expired)
        if expired:
            names = [ks.expiring(s) for s in range(SHARDS)]
            bound = str(now)
        else:
            assert isinstance(rule, IdleFor)
            names = [ks.idle(s) for s in range(SHARDS)]
            bound = f"({now - rule.duration // _US_DELTA}"
        matches: list[tuple[int, str, ConversationKey]] = []
        offset_limit = limit
        for _round in range(_RESTARTS):
            candidates = await self._shard_candidates(names, bound, offset_limit)
            if not candidates:
                break
            keys = [ConversationKey.from_storage_name(text(m)) for _, m, _ in candidates]
            infos = await self._infos(keys)
            fixes: list[tuple[str, bytes | str, int, int | None]] = []
            matches = []
            for (name, member, score), key, info in zip(candidates, keys, infos, strict=True):
                if expired:
                    if info.status == "expired":  # already dropped by the server
                        matches.append((score, key.session_id, key))
                    elif info.status != "ok" or info.expires is None:
                        fixes.append((name, member, score, None))
                    else:
                        if info.expires != score:
                            fixes.append((name, member, score, info.expires))
                        if info.expires <= now:
                            matches.append((info.up, key.session_id, key))
                else:
                    assert isinstance(rule, IdleFor)
                    if info.status != "ok":
                        fixes.append((name, member, score, None))
                    elif info.up != score:
                        fixes.append((name, member, score, info.up))
                    if info.status == "ok" and info.up < now - rule.duration // _US_DELTA:
                        matches.append((info.up, key.session_id, key))
            await self._fix(fixes)
            if not fixes or len(matches) >= limit:
                break
        matches.sort(key=lambda item: (item[0], item[1]))
        return [key for _, _, key in matches[:limit]]

    async def _find_over_cap(self, keep: int, limit: int) -> list[ConversationKey]:
        ks = self.ctx.keys
        owners: list[bytes] = []
        replies = await self.ctx.client.many(
            [
                (None, [ks.owner_registry(s)], ("SMEMBERS", ks.owner_registry(s)))
                for s in range(SHARDS)
            ]
        )
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
            owners.extend(reply)
        matches: list[tuple[int, str, ConversationKey]] = []
        for name in owners:
            tenant, owner = decode_owner_name(text(name))
            entries = await self._owned_entries(tenant, owner, None, 1_000_000_000)
            for info in entries[keep:]:
                assert info.key is not None
                matches.append((info.up, info.key.session_id, info.key))
        matches.sort(key=lambda item: (item[0], item[1]))
        return [key for _, _, key in matches[:limit]]

    # --- administration -------------------------------------------------------------

    async def repair_indexes(self) -> int:
        """Re-add every live conversation to the listing and sweeper indexes (after a
        process died between a write and its index step). Returns how many were seen."""
        pattern = self.ctx.keys.meta_pattern()
        seen = 0
        for name in await self.ctx.client.scan(pattern):
            raw = text(name)
            digest = raw[raw.index("{") + 1 : raw.index("}")]
            h = raw[: -len(":m")] + ":h"
            reply = await self.ctx.client.read(CONV_INFO, [h, raw], ["", "1"])
            info = _info(reply)
            if info.status != "ok" or info.key is None or info.key.digest != digest:
                continue
            seen += 1
            calls = self._touch_calls(info.key, info.owner, info.up)
            if info.expires is not None:
                exp = self.ctx.keys.expiring(self.ctx.keys.shard_of(info.key))
                calls.append(
                    (None, [exp], ("ZADD", exp, info.expires, self.ctx.keys.member(info.key)))
                )
            await self._index(calls)
        return seen
