"""``recent``, ``tail``, ``history`` and ``get_transcript`` composed from two indexed primitives.

An adapter that implements ``_read_messages`` (by position) and ``_get_conversation``
gets these reads for free; it overrides them only to be faster. Each composed read
checks that the conversation did not change while it read (same tail, length and
``updated_at`` before and after) and starts again when it did, so it never returns a
transcript that did not exist; after :data:`ATTEMPTS` changes in a row it raises
``ConflictError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from ..errors import ConflictError
from ..keys import ConversationKey
from ..models import ConversationInfo, ConversationTail, StoredMessage, TranscriptMessage

if TYPE_CHECKING:
    from .conversations import ConversationStore, TranscriptQuery

PAGE = 256
"""Messages one primitive read asks for while scanning."""
ATTEMPTS = 8
"""Reads that may be spoiled by concurrent writes before one gives up."""

T = TypeVar("T")


def _version(info: ConversationInfo | None) -> tuple[object, ...] | None:
    if info is None:
        return None
    return (info.tail_message_id, info.message_count, info.updated_at)


async def _consistent(
    store: ConversationStore,
    key: ConversationKey,
    principal: str,
    empty: T,
    read: Callable[[int], Awaitable[T]],
) -> T:
    """``read(message_count)`` between two equal snapshots of the conversation."""
    for _ in range(ATTEMPTS):
        before = await store._get_conversation(key, principal)
        if before is None:
            return empty
        result = await read(before.message_count)
        after = await store._get_conversation(key, principal)
        if _version(after) == _version(before):
            return result
    raise ConflictError("the conversation kept changing while it was read; retry", key=key)


def _is_turn(message: StoredMessage) -> bool:
    return message.role in ("user", "assistant")


async def recent(
    store: ConversationStore, key: ConversationKey, principal: str, limit: int
) -> list[StoredMessage]:
    """The last ``limit`` user/assistant messages, oldest first, scanning backwards."""

    async def read(count: int) -> list[StoredMessage]:
        found: list[StoredMessage] = []
        end = count
        while end > 0 and len(found) < limit:
            start = max(0, end - max(PAGE, limit))
            page = await store._read_messages(key, principal, start, end - start)
            found[:0] = [m for m in page if _is_turn(m)]
            end = start
        return found[-limit:]

    return await _consistent(store, key, principal, [], read)


async def tail(
    store: ConversationStore, key: ConversationKey, principal: str, limit: int
) -> ConversationTail | None:
    """The metadata and the last ``limit`` rows, read between two equal snapshots."""
    for _ in range(ATTEMPTS):
        before = await store._get_conversation(key, principal)
        if before is None:
            return None
        count = before.message_count
        rows = (
            await store._read_messages(key, principal, max(0, count - limit), limit)
            if limit
            else []
        )
        after = await store._get_conversation(key, principal)
        if _version(after) == _version(before):
            return ConversationTail(before, rows)
    raise ConflictError("the conversation kept changing while it was read; retry", key=key)


async def history(
    store: ConversationStore, key: ConversationKey, principal: str
) -> list[StoredMessage]:
    """The latest compaction message and everything after it (all if none)."""

    async def read(count: int) -> list[StoredMessage]:
        tail: list[StoredMessage] = []
        end = count
        while end > 0:
            start = max(0, end - PAGE)
            page = await store._read_messages(key, principal, start, end - start)
            for position in range(len(page) - 1, -1, -1):
                if page[position].compaction:
                    return page[position:] + tail
            tail = page + tail
            end = start
        return tail

    return await _consistent(store, key, principal, [], read)


async def _first_at_or_after(
    store: ConversationStore, key: ConversationKey, principal: str, count: int, moment: datetime
) -> int:
    """The first position whose ``created_at`` is at or after ``moment`` (binary search:
    ``created_at`` never decreases along the transcript)."""
    low, high = 0, count
    while low < high:
        middle = (low + high) // 2
        row = await store._read_messages(key, principal, middle, 1)
        if not row or row[0].created_at >= moment:
            high = middle
        else:
            low = middle + 1
    return low


def _row(index: int, message: StoredMessage) -> TranscriptMessage:
    return TranscriptMessage(index, message.role, message.content, message.id, message.created_at)


async def get_transcript(
    store: ConversationStore, key: ConversationKey, principal: str, query: TranscriptQuery
) -> list[TranscriptMessage]:
    """``get_transcript`` by position reads: one read for an index on the whole
    transcript, a binary search for a time range, a scan for a speaker view."""

    async def whole(count: int) -> list[TranscriptMessage]:
        if query.index is not None:
            position = query.index + count if query.index < 0 else query.index
            if not 0 <= position < count:
                return []
            return [
                _row(position, m) for m in await store._read_messages(key, principal, position, 1)
            ]
        start, end = 0, count
        if query.time_range is not None:
            start = await _first_at_or_after(store, key, principal, count, query.time_range[0])
        rows: list[TranscriptMessage] = []
        while start < end:
            page = await store._read_messages(key, principal, start, min(PAGE, end - start))
            if not page:
                break
            for message in page:
                if query.time_range is not None and message.created_at > query.time_range[1]:
                    return rows
                rows.append(_row(message.seq, message))
                if query.limit is not None and len(rows) >= query.limit:
                    return rows
            start += len(page)
        return rows

    async def by_speaker(count: int) -> list[TranscriptMessage]:
        view: list[StoredMessage] = []
        for start in range(0, count, PAGE):
            page = await store._read_messages(key, principal, start, PAGE)
            view.extend(m for m in page if m.role == query.speaker)
        if query.index is not None:
            position = query.index + len(view) if query.index < 0 else query.index
            return [_row(position, view[position])] if 0 <= position < len(view) else []
        rows = [
            _row(index, m)
            for index, m in enumerate(view)
            if query.time_range is None
            or query.time_range[0] <= m.created_at <= query.time_range[1]
        ]
        return rows if query.limit is None else rows[: query.limit]

    read = whole if query.speaker == "all" else by_speaker
    return await _consistent(store, key, principal, [], read)
