"""ConversationStore on PostgreSQL: one row per message, metadata and counts per conversation.

Every read is one statement: the header (visibility), the conversation row (counts) and
the messages are joined, so a read by index is an index lookup on ``seq``,
``user_pos`` or ``assistant_pos`` (negative indexes resolved from the counts), a time
range is a range scan on ``(created_at, seq)``, ``recent`` a range on ``turn_pos`` (the
position among user and assistant messages) from the count, ``tail`` a range on ``seq``
from the count read in the same statement, and ``history`` starts from the compaction
index. Each query carries a strict condition on the column its
(partial) index is built on, which is what lets the planner use that index and no other.
Every write is one call of a server-side function (``sql/functions/<name>.sql``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

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
    decode_metadata,
)
from agentstores.stores.kit import (
    decode_cursor,
    encode_cursor,
    from_micros,
    to_micros,
    writer_nonce,
)

from ._base import VISIBLE, PostgresStoreBase
from .database import Conn, WriteOutcome

_APPEND = (
    "SELECT first_seq, stamp, present FROM __S__.conv_append("
    "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"
)
_APPEND_EVIDENCE = """
SELECT hit.message_id, hit.seq, hit.created_at
  FROM unnest($3::text[]) AS u(id)
 CROSS JOIN LATERAL (
       SELECT m.message_id, m.seq, m.created_at, m.nonce FROM __S__.messages m
        WHERE m.tenant = $1 AND m.session_id = $2 AND m.message_id = u.id LIMIT 1) hit
 WHERE hit.nonce = $4
 ORDER BY hit.seq
"""
_CONV_NONCE = "SELECT nonce FROM __S__.conversations WHERE tenant = $1 AND session_id = $2"
_KEY_NONCE = "SELECT nonce, erased_at FROM __S__.keys WHERE tenant = $1 AND session_id = $2"
_SET_STATUS = "SELECT __S__.conv_set_status($1, $2, $3, $4, $5, $6, $7)"
_SET_TITLE = "SELECT __S__.conv_set_title($1, $2, $3, $4, $5, $6, $7)"
_SET_METADATA = "SELECT __S__.conv_set_metadata($1, $2, $3, $4::jsonb, $5, $6, $7, $8)"
_SHARE = "SELECT __S__.conv_share($1, $2, $3, $4, $5, $6, $7)"
_TRUNCATE = "SELECT __S__.conv_truncate($1, $2, $3, $4, $5, $6, $7, $8, $9)"
_BRANCH = "SELECT __S__.conv_branch($1, $2, $3, $4, $5, $6, $7)"
_ERASE = "SELECT __S__.conv_erase($1, $2, $3, $4, $5, $6, $7, $8)"

_FROM_VISIBLE = f"""
  FROM __S__.keys k
  JOIN __S__.conversations c ON c.tenant = k.tenant AND c.session_id = k.session_id
  JOIN __S__.messages m ON m.tenant = c.tenant AND m.session_id = c.session_id
 WHERE k.tenant = $1 AND k.session_id = $2 AND {VISIBLE}
"""
_POSITION = {"all": "m.seq", "user": "m.user_pos", "assistant": "m.assistant_pos"}
_COUNT = {"all": "c.message_count", "user": "c.user_count", "assistant": "c.assistant_count"}


def _transcript_sql(speaker: str, mode: str) -> str:
    pos, count = _POSITION[speaker], _COUNT[speaker]
    select = f"SELECT {pos} AS pos, m.role, m.content, m.message_id, m.created_at {_FROM_VISIBLE}"
    if mode == "index":
        # The position is computed once (an InitPlan), so the lookup is a restriction on
        # the messages scan, never a join filter applied to the whole conversation.
        target = (
            f"(SELECT CASE WHEN $4::bigint < 0 THEN {count} + $4 ELSE $4 END "
            "FROM __S__.conversations c WHERE c.tenant = $1 AND c.session_id = $2)"
        )
        return f"{select} AND {pos} = {target}"
    if mode == "range":
        role = "" if speaker == "all" else f"AND m.role = '{speaker}'"
        return (
            f"{select} AND m.created_at >= $4 AND m.created_at <= $5 {role} "
            "ORDER BY m.created_at, m.seq LIMIT $6"
        )
    return f"{select} AND {pos} >= 0 ORDER BY {pos} LIMIT $4"


_STORED = "SELECT m.message_id, m.role, m.content, m.metadata, m.compaction, m.seq, m.created_at"
# History's lower bound (the last compaction) and recent's (the turn count less n) come
# from rows read at run time, so the planner guesses a third of the conversation. Each
# carries a LIMIT it can never reach (recent: n; history: the message count, as every
# position is below it), and a LIMIT that is not a constant is costed as a tenth of the
# rows: the ordered scan of the index, which stops early, then beats a sequential or
# bitmap scan and a sort (after an ANALYZE, a 100,000-message conversation flipped).
_RECENT = f"""{_STORED} {_FROM_VISIBLE}
   AND m.turn_pos >= (SELECT x.turn_count - $4 FROM __S__.conversations x
                       WHERE x.tenant = $1 AND x.session_id = $2)
 ORDER BY m.turn_pos LIMIT $4"""
_HISTORY = f"""{_STORED} {_FROM_VISIBLE}
   AND m.seq >= coalesce((SELECT max(x.seq) FROM __S__.messages x
                           WHERE x.tenant = $1 AND x.session_id = $2 AND x.compaction), 0)
 ORDER BY m.seq
 LIMIT (SELECT x.message_count FROM __S__.conversations x
         WHERE x.tenant = $1 AND x.session_id = $2)"""
_READ_MESSAGES = f"""{_STORED} {_FROM_VISIBLE} AND m.seq >= $4 ORDER BY m.seq LIMIT $5"""

_INFO = """c.tenant, c.session_id, c.owner, c.title, c.created_at, c.updated_at, c.expires_at,
       c.last_turn_status, c.tail_message_id, c.message_count, c.metadata, k.shared_with"""
_GET = f"""
SELECT {_INFO}
  FROM __S__.keys k
  JOIN __S__.conversations c ON c.tenant = k.tenant AND c.session_id = k.session_id
 WHERE k.tenant = $1 AND k.session_id = $2 AND {VISIBLE}
"""
# The conversation row and its last $4 rows in one statement, so one snapshot: the rows
# end at the tail the row names. The rows come aggregated, one array per column, beside
# the conversation's columns: one result row, the metadata (up to 256 KiB) sent once.
# The lower bound comes from the row just read, so (as for recent) the rows carry a
# LIMIT they never reach, which keeps the ordered scan of messages_seq the cheapest plan.
_TAIL_COLUMNS = ("message_id", "role", "content", "metadata", "compaction", "seq", "created_at")
_TAIL_ARRAYS = ", ".join(f"array_agg(m.{c} ORDER BY m.seq) AS rows_{c}" for c in _TAIL_COLUMNS)
_TAIL = f"""
SELECT {_INFO}, t.*
  FROM __S__.keys k
  JOIN __S__.conversations c ON c.tenant = k.tenant AND c.session_id = k.session_id
 CROSS JOIN LATERAL (
       SELECT {_TAIL_ARRAYS}
         FROM (SELECT m.* FROM __S__.messages m
                WHERE m.tenant = $1 AND m.session_id = $2
                  AND m.seq >= c.message_count - $4::bigint
                ORDER BY m.seq LIMIT $4) m
       ) t
 WHERE k.tenant = $1 AND k.session_id = $2 AND {VISIBLE}
"""
# Listing reads the shares per row (a correlated lookup, not a join) so that nothing but
# the listing index can drive it.
_LISTED = _INFO.replace(
    "k.shared_with",
    "(SELECT k.shared_with FROM __S__.keys k "
    "WHERE k.tenant = c.tenant AND k.session_id = c.session_id) AS shared_with",
)
_LIST_FIRST = f"""
SELECT {_LISTED}
  FROM __S__.conversations c
 WHERE c.tenant = $1 AND c.owner = $2 AND c.updated_at > '-infinity'
 ORDER BY c.updated_at DESC, c.session_id DESC LIMIT $3
"""
_LIST_AFTER = f"""
SELECT {_LISTED}
  FROM __S__.conversations c
 WHERE c.tenant = $1 AND c.owner = $2 AND c.updated_at > '-infinity'
   AND (c.updated_at, c.session_id) < ($4, $5)
 ORDER BY c.updated_at DESC, c.session_id DESC LIMIT $3
"""
_SWEEP_EXPIRED = """
SELECT tenant, session_id FROM __S__.conversations
 WHERE expires_at <= statement_timestamp() ORDER BY expires_at LIMIT $1
"""
_SWEEP_IDLE = """
SELECT tenant, session_id FROM __S__.conversations
 WHERE (updated_at AT TIME ZONE 'UTC') < ((statement_timestamp() - $1::interval) AT TIME ZONE 'UTC')
 ORDER BY (updated_at AT TIME ZONE 'UTC') LIMIT $2
"""
_SWEEP_OVERCAP = """
SELECT x.tenant, x.session_id
  FROM (SELECT o.tenant, o.owner FROM __S__.owner_counts o
         WHERE o.conversations > $1 ORDER BY o.conversations DESC LIMIT $2) AS big
 CROSS JOIN LATERAL (
        SELECT c.tenant, c.session_id FROM __S__.conversations c
         WHERE c.tenant = big.tenant AND c.owner = big.owner AND c.updated_at > '-infinity'
         ORDER BY c.updated_at DESC, c.session_id DESC OFFSET $1 LIMIT $2) AS x
 LIMIT $2
"""
_PURGE_TOMBSTONES = """
DELETE FROM __S__.keys
 WHERE (tenant, session_id) IN (
        SELECT tenant, session_id FROM __S__.keys
         WHERE erased_at <= clock_timestamp() - $1::interval LIMIT $2)
   AND erased_at <= clock_timestamp() - $1::interval
"""
PURGE_BATCH = 1000


def _stored(r: Any) -> StoredMessage:
    return StoredMessage(
        id=r["message_id"],
        role=r["role"],
        content=json.loads(r["content"]),
        metadata=json.loads(r["metadata"]),
        compaction=r["compaction"],
        seq=r["seq"],
        created_at=r["created_at"],
    )


def _tail_rows(r: Any) -> list[StoredMessage]:
    """The rows ``_TAIL`` aggregated, oldest first (none when its arrays are NULL)."""
    arrays = [r[f"rows_{c}"] for c in _TAIL_COLUMNS]
    if arrays[0] is None:
        return []
    return [
        _stored(dict(zip(_TAIL_COLUMNS, row, strict=True))) for row in zip(*arrays, strict=True)
    ]


def _info(r: Any) -> ConversationInfo:
    return ConversationInfo(
        key=ConversationKey(r["tenant"], r["session_id"]),
        owner=r["owner"],
        title=r["title"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        expires_at=_aware(r["expires_at"]),
        last_turn_status=r["last_turn_status"],
        tail_message_id=r["tail_message_id"],
        message_count=r["message_count"],
        shared_with=frozenset(r["shared_with"]),
        metadata=decode_metadata(json.loads(r["metadata"])),
    )


def _aware(moment: datetime | None) -> datetime | None:
    """A stored time as the caller wrote it. asyncpg writes an instant equal to
    ``datetime.max`` (or ``min``) as PostgreSQL's ``infinity`` and reads that back as a
    naive ``datetime.max``: aware again here, in UTC, as every other stored time."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _update_json(updates: MetadataUpdate) -> str:
    """An update as the server-side merge takes it: name -> the value's canonical JSON
    text, or null to remove the name."""
    return json.dumps(
        {name: None if raw is None else raw.decode() for name, raw in updates.items()},
        ensure_ascii=False,
    )


_UNCHANGED_BY_JSON = (str, int, bool)
"""Exact types JSON gives back as they were: a read returns the same value."""


def _as_read(value: Any, encoded: bytes) -> Any:
    """``value`` as a read returns it: itself when JSON cannot change it (a string, an
    int, a bool, None), else its canonical JSON decoded (a fresh copy, tuples as lists)."""
    if value is None or type(value) in _UNCHANGED_BY_JSON:
        return value
    return json.loads(encoded)


def _appended(
    messages: Sequence[EncodedMessage], first_seq: int, stamp: datetime, skip: set[str]
) -> list[StoredMessage]:
    fresh = [m for m in messages if m.message.id not in skip]
    return [
        StoredMessage(
            id=m.message.id,
            role=m.message.role,
            content=_as_read(m.message.content, m.content_json),
            metadata={} if m.metadata_json == b"{}" else json.loads(m.metadata_json),
            compaction=m.message.compaction,
            seq=first_seq + i,
            created_at=stamp,
        )
        for i, m in enumerate(fresh)
    ]


class PostgresConversationStore(PostgresStoreBase, ConversationStore):
    # --- writes ---------------------------------------------------------------------

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        messages = request.messages
        n = writer_nonce()
        ids = [m.message.id for m in messages]
        expected_tail = request.expected_tail if request.has_tail_condition else None
        args = (
            key.tenant,
            key.session_id,
            principal,
            ids,
            [m.message.role for m in messages],
            [m.content_json for m in messages],
            [m.metadata_json for m in messages],
            [m.message.compaction for m in messages],
            request.create_if_absent,
            request.last_turn_status,
            request.has_tail_condition,
            expected_tail,
            request.epoch,
            request.title,
            request.expires_at,
            n,
            self.ttl,
            None if request.metadata is None else _update_json(request.metadata),
            MAX_CONVERSATION_METADATA_BYTES,
        )

        async def run(conn: Conn) -> list[StoredMessage]:
            r = await conn.fetchrow(self.sql(_APPEND), *args)
            if r["first_seq"] is None:
                return []
            return _appended(messages, r["first_seq"], r["stamp"], set(r["present"]))

        async def reconcile(conn: Conn) -> WriteOutcome[list[StoredMessage]]:
            if not ids:
                found = await conn.fetchval(self.sql(_CONV_NONCE), key.tenant, key.session_id)
                return WriteOutcome.landed([]) if found == n else WriteOutcome.unknown()
            rows = await conn.fetch(self.sql(_APPEND_EVIDENCE), key.tenant, key.session_id, ids, n)
            if not rows:
                return WriteOutcome.unknown()
            ours = {r["message_id"] for r in rows}
            skip = {i for i in ids if i not in ours}
            return WriteOutcome.landed(
                _appended(messages, rows[0]["seq"], rows[0]["created_at"], skip)
            )

        return await self.write(
            run,
            reconcile,
            what="conversations.append_messages",
            key=key,
            epoch=request.epoch,
            expected=expected_tail,
        )

    def _conversation_written(self, key: ConversationKey, n: Any) -> Any:
        async def reconcile(conn: Conn) -> WriteOutcome[None]:
            found = await conn.fetchval(self.sql(_CONV_NONCE), key.tenant, key.session_id)
            return WriteOutcome.landed(None) if found == n else WriteOutcome.unknown()

        return reconcile

    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        n = writer_nonce()
        args = (key.tenant, key.session_id, principal, status, epoch, n, self.ttl)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_SET_STATUS), *args)

        await self.write(
            run,
            self._conversation_written(key, n),
            what="conversations.set_last_turn_status",
            key=key,
            epoch=epoch,
        )

    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        n = writer_nonce()
        args = (key.tenant, key.session_id, principal, title, epoch, n, self.ttl)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_SET_TITLE), *args)

        await self.write(
            run,
            self._conversation_written(key, n),
            what="conversations.set_title",
            key=key,
            epoch=epoch,
        )

    async def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        n = writer_nonce()
        u = _update_json(updates)
        args = (key.tenant, key.session_id, principal, u, MAX_CONVERSATION_METADATA_BYTES)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_SET_METADATA), *args, epoch, n, self.ttl)

        await self.write(
            run,
            self._conversation_written(key, n),
            what="conversations.set_metadata",
            key=key,
            epoch=epoch,
        )

    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        n = writer_nonce()
        args = (key.tenant, key.session_id, principal, with_principal, shared, n, self.ttl)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_SHARE), *args)

        async def reconcile(conn: Conn) -> WriteOutcome[None]:
            r = await conn.fetchrow(self.sql(_KEY_NONCE), key.tenant, key.session_id)
            return (
                WriteOutcome.landed(None)
                if r is not None and r["nonce"] == n
                else WriteOutcome.unknown()
            )

        await self.write(run, reconcile, what="conversations.share", key=key)

    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        n = writer_nonce()
        args = (
            key.tenant,
            key.session_id,
            principal,
            message_id,
            epoch,
            n,
            self.ttl,
            cut,
            expected_tail,
        )

        async def run(conn: Conn) -> int:
            return int(await conn.fetchval(self.sql(_TRUNCATE), *args))

        # The count removed is not recorded, so a lost truncate cannot be reconciled.
        return await self.write(
            run,
            None,
            what="conversations.truncate",
            key=key,
            epoch=epoch,
            expected=expected_tail,
        )

    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        n = writer_nonce()
        args = (key.tenant, key.session_id, principal, message_id, new_key.session_id, n, self.ttl)

        async def run(conn: Conn) -> None:
            await conn.execute(self.sql(_BRANCH), *args)

        async def reconcile(conn: Conn) -> WriteOutcome[None]:
            r = await conn.fetchrow(self.sql(_KEY_NONCE), new_key.tenant, new_key.session_id)
            return (
                WriteOutcome.landed(None)
                if r is not None and r["nonce"] == n
                else WriteOutcome.unknown()
            )

        await self.write(run, reconcile, what="conversations.branch", key=key)

    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        n = writer_nonce()
        kind: str | None = None
        idle: timedelta | None = None
        keep: int | None = None
        if isinstance(rule, Expired):
            kind = "expired"
        elif isinstance(rule, IdleFor):
            kind, idle = "idle", rule.duration
        elif isinstance(rule, OverCap):
            kind, keep = "overcap", rule.keep
        args = (key.tenant, key.session_id, principal, kind, idle, keep, n, self.ttl)

        async def run(conn: Conn) -> bool:
            return bool(await conn.fetchval(self.sql(_ERASE), *args))

        async def reconcile(conn: Conn) -> WriteOutcome[bool]:
            r = await conn.fetchrow(self.sql(_KEY_NONCE), key.tenant, key.session_id)
            if r is not None and r["nonce"] == n and r["erased_at"] is not None:
                return WriteOutcome.landed(True)
            return WriteOutcome.unknown()

        what = "conversations.delete" if rule is None else "conversations.erase_if"
        return await self.write(run, reconcile, what=what, key=key)

    # --- reads ----------------------------------------------------------------------

    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        base: tuple[Any, ...] = (key.tenant, key.session_id, principal)
        if query.index is not None:
            sql, args = _transcript_sql(query.speaker, "index"), (*base, query.index)
        elif query.time_range is not None:
            start, end = query.time_range
            sql = _transcript_sql(query.speaker, "range")
            args = (*base, start, end, query.limit)
        else:
            sql, args = _transcript_sql(query.speaker, "all"), (*base, query.limit)

        async def run(conn: Conn) -> list[TranscriptMessage]:
            rows = await conn.fetch(self.sql(sql), *args)
            return [
                TranscriptMessage(
                    r["pos"], r["role"], json.loads(r["content"]), r["message_id"], r["created_at"]
                )
                for r in rows
            ]

        return await self.db.read(run)

    async def _recent(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        async def run(conn: Conn) -> list[StoredMessage]:
            rows = await conn.fetch(self.sql(_RECENT), key.tenant, key.session_id, principal, limit)
            return [_stored(r) for r in rows]

        return await self.db.read(run)

    async def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        async def run(conn: Conn) -> list[StoredMessage]:
            rows = await conn.fetch(self.sql(_HISTORY), key.tenant, key.session_id, principal)
            return [_stored(r) for r in rows]

        return await self.db.read(run)

    async def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        async def run(conn: Conn) -> list[StoredMessage]:
            rows = await conn.fetch(
                self.sql(_READ_MESSAGES), key.tenant, key.session_id, principal, start, limit
            )
            return [_stored(r) for r in rows]

        return await self.db.read(run)

    async def _tail(
        self, key: ConversationKey, principal: str, limit: int
    ) -> ConversationTail | None:
        async def run(conn: Conn) -> ConversationTail | None:
            r = await conn.fetchrow(self.sql(_TAIL), key.tenant, key.session_id, principal, limit)
            return None if r is None else ConversationTail(_info(r), _tail_rows(r))

        return await self.db.read(run)

    async def _get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None:
        async def run(conn: Conn) -> ConversationInfo | None:
            r = await conn.fetchrow(self.sql(_GET), key.tenant, key.session_id, principal)
            return None if r is None else _info(r)

        return await self.db.read(run)

    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        after = decode_cursor(cursor) if cursor is not None else None

        async def run(conn: Conn) -> Page:
            if after is None:
                rows = await conn.fetch(self.sql(_LIST_FIRST), tenant, principal, limit + 1)
            else:
                updated_micros, session_id = after
                rows = await conn.fetch(
                    self.sql(_LIST_AFTER),
                    tenant,
                    principal,
                    limit + 1,
                    from_micros(updated_micros),
                    session_id,
                )
            items = [_info(r) for r in rows[:limit]]
            next_cursor = None
            if len(rows) > limit and items:
                last = items[-1]
                next_cursor = encode_cursor(to_micros(last.updated_at), last.key.session_id)
            return Page(items, next_cursor)

        return await self.db.read(run)

    async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        if limit == 0:
            return []

        async def run(conn: Conn) -> list[ConversationKey]:
            if isinstance(rule, Expired):
                rows = await conn.fetch(self.sql(_SWEEP_EXPIRED), limit)
            elif isinstance(rule, IdleFor):
                rows = await conn.fetch(self.sql(_SWEEP_IDLE), rule.duration, limit)
            else:
                assert isinstance(rule, OverCap)
                rows = await conn.fetch(self.sql(_SWEEP_OVERCAP), rule.keep, limit)
            return [ConversationKey(r["tenant"], r["session_id"]) for r in rows]

        keys = await self.db.read(run)
        await self.purge_tombstones()
        return keys

    async def purge_tombstones(self, limit: int = PURGE_BATCH) -> int:
        """Delete up to ``limit`` tombstones past ``tombstone_ttl`` (the sweeper calls this
        through ``find_sweepable``); a tombstone reclaimed meanwhile is left alone."""

        async def run(conn: Conn) -> int:
            status = await conn.execute(self.sql(_PURGE_TOMBSTONES), self.ttl, limit)
            return int(status.split()[-1])

        # Idempotent: re-running after a lost connection deletes what is still due.
        return await self.db.read(run)
