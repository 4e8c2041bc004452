"""ConversationStore on MongoDB: one document per message in ``<prefix>messages``, the
header's ``c`` entry as the commit point.

The message documents and their layout are in :mod:`.transcript`.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import BulkWriteError

from agentstores.errors import (
    AgentStoresError,
    BackendUnavailableError,
    Refusal,
    refusal_error,
)
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

from ._base import MongoStoreBase, resent
from .header import (
    ERASED,
    LIVE,
    RETRY,
    Header,
    Retry,
    commit,
    ensure_header,
    read_header,
    retire,
    touched,
    write,
)
from .transcript import (
    BY_EQUALITY,
    PAGE,
    id_key,
    message_docs,
    mid,
    new_conv,
    rank_key,
    stored,
    transcript_row,
)

COPY_CHUNK = 500
"""Messages a branch copies per round trip."""
_US = timedelta(microseconds=1)


def _no_message(message_id: str, key: ConversationKey) -> AgentStoresError:
    return refusal_error(
        Refusal.NOT_FOUND, f"no message {message_id!r} in this conversation", key=key
    )


def _stored_metadata(conv: dict[str, Any] | None) -> dict[str, str]:
    """The conv entry's ``md``: ``[name, canonical JSON text]`` pairs (a list, since a
    name may hold ``.`` or ``$``, which a document field name may not); absent in older
    headers."""
    return {name: text for name, text in (conv or {}).get("md") or ()}


def _merged(conv: dict[str, Any] | None, updates: MetadataUpdate) -> list[list[str]]:
    """The ``md`` pairs after merging ``updates`` in (sorted by name)."""
    current = {name: text.encode() for name, text in _stored_metadata(conv).items()}
    merged = merge_metadata(current, updates)
    return [[name, merged[name].decode()] for name in sorted(merged)]


def _info(key: ConversationKey, h: Header) -> ConversationInfo:
    d = h.live
    assert d is not None
    conv = d["c"]
    return ConversationInfo(
        key=key,
        owner=d["o"],
        title=conv["ti"],
        created_at=kit.from_micros(conv["ca"]),
        updated_at=kit.from_micros(d["u"]),
        expires_at=None if d.get("cx") is None else kit.from_micros(d["cx"]),
        last_turn_status=conv["lts"],
        tail_message_id=conv["tl"],
        message_count=conv["n"],
        shared_with=frozenset(d.get("sh") or ()),
        metadata=decode_metadata(_stored_metadata(conv)),
    )


READ_ATTEMPTS = 32
"""How often a read starts again from a fresh header when the transcript changed under
it, before it gives up with ``BackendUnavailableError``."""

M = TypeVar("M", bound=Callable[..., Awaitable[Any]])


class _Moved(Exception):
    """A message document the read's header covers is gone, or was written after that
    header (a truncation committed and cut it, and an append may have reused the
    position): the transcript changed under the read."""


def _covered(h: Header, docs: list[dict[str, Any]], expected: int) -> list[dict[str, Any]]:
    """``docs`` when they are the ``expected`` documents of ``h``'s transcript (each
    written before ``h``'s commit: ``b < rev``), else :class:`_Moved`."""
    if len(docs) != expected or any(d["b"] >= h.rev for d in docs):
        raise _Moved
    return docs


def _one_covered(h: Header, doc: dict[str, Any] | None) -> dict[str, Any]:
    """``doc`` when ``h``'s transcript holds it (see :func:`_covered`), else :class:`_Moved`."""
    if doc is None or doc["b"] >= h.rev:
        raise _Moved
    return doc


def snapshot_read(method: M) -> M:
    """Run a transcript read again from a fresh header while the documents its header
    covers were cut or rewritten under it, so a read returns one committed state, never
    a mix of a header and a later truncation's cut."""

    @functools.wraps(method)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        for _ in range(READ_ATTEMPTS):
            try:
                return await method(self, *args, **kwargs)
            except _Moved:
                continue
        raise BackendUnavailableError(
            f"the transcript changed under {READ_ATTEMPTS} reads in a row; try again"
        )

    return wrapper  # type: ignore[return-value]


class MongoConversationStore(MongoStoreBase, ConversationStore):
    # --- writes ------------------------------------------------------------------

    async def _insert_messages(self, h: Header, docs: list[dict[str, Any]], nonce: str) -> bool:
        """Insert ``docs`` (uncommitted); False when documents were in the way (they are
        retired or cleared, so the caller reads the header again and retries)."""
        ctx = self.ctx
        if not docs:
            return True
        try:
            await ctx.messages.insert_many(docs, ordered=True)
            return True
        except BulkWriteError:
            pass
        gen = docs[0]["c"]
        await ctx.messages.delete_many({"c": gen, "w": nonce})
        in_flight = False
        async for other in ctx.messages.find(
            {"_id": {"$in": [d["_id"] for d in docs]}}, {"b": 1, "w": 1}
        ):
            if other["b"] >= h.rev:
                in_flight = True
            else:
                await ctx.messages.delete_one({"_id": other["_id"], "b": other["b"]})
        if in_flight:
            await retire(ctx, h)
        return False

    @resent
    async def _present(self, gen: str, count: int, ids: list[str]) -> set[str]:
        """Which of ``ids`` the committed transcript (``s < count``) holds."""
        keys = [id_key(gen, i) for i in ids]
        if len(keys) <= BY_EQUALITY:
            pages = await asyncio.gather(*(self._all({"ci": k}, {"i": 1, "s": 1}) for k in keys))
            found = [d for page in pages for d in page]
        else:
            found = await self._all({"ci": {"$in": keys}}, {"i": 1, "s": 1})
        return {d["i"] for d in found if d["s"] < count}

    async def _all(
        self, where: dict[str, Any], projection: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        return [d async for d in self.ctx.messages.find(where, projection)]

    async def _committed(self, where: dict[str, Any], count: int) -> dict[str, Any] | None:
        """The committed message ``where`` finds (``s < count``): an uncommitted or
        garbage document may share its id or rank, never its position."""
        return next((d for d in await self._all(where) if d["s"] < count), None)

    async def _find_message(self, gen: str, count: int, message_id: str) -> dict[str, Any] | None:
        """The committed message ``message_id`` (one indexed equality)."""
        return await self._committed({"ci": id_key(gen, message_id)}, count)

    async def _at(self, gen: str, seqs: list[int]) -> list[dict[str, Any]]:
        """The messages at ``seqs`` (committed positions), in that order."""
        if not seqs:
            return []
        found = {
            d["s"]: d
            async for d in self.ctx.messages.find({"_id": {"$in": [mid(gen, s) for s in seqs]}})
        }
        return [found[s] for s in seqs if s in found]

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        ctx = self.ctx

        async def attempt(h: Header) -> list[StoredMessage] | Retry:
            if h.status == ERASED:
                raise h.erased_error()
            conv = h.conv
            if conv is None and not request.create_if_absent:
                raise refusal_error(Refusal.NOT_FOUND, key=key)
            h.check_write(principal, request.epoch)
            fresh = list(request.messages)
            if conv is not None and conv["n"] > 0 and fresh:
                assert h.gen is not None
                present = await self._present(h.gen, conv["n"], [m.message.id for m in fresh])
                fresh = [m for m in fresh if m.message.id not in present]
            if request.messages and not fresh:
                return []
            if request.has_tail_condition:
                tail = conv["tl"] if conv is not None else None
                if tail != request.expected_tail:
                    raise refusal_error(
                        Refusal.STALE_TAIL, key=key, tail=tail, expected=request.expected_tail
                    )
            merged = None if request.metadata is None else _merged(conv, request.metadata)
            if h.doc is None:
                await ensure_header(ctx, key)
                return RETRY
            fields, gen = h.claim(principal)
            assert h.now_us is not None
            now_us = h.now_us
            now = kit.from_micros(now_us)
            if conv is None:
                conv = new_conv(now_us)
            stamp = now
            if conv["la"] is not None and conv["la"] > now_us:
                stamp = kit.from_micros(conv["la"])
            nonce = kit.writer_nonce_hex()
            items = [
                (
                    m.message.id,
                    m.message.role,
                    m.message.compaction,
                    m.content_json.decode("utf-8"),
                    m.metadata_json.decode("utf-8"),
                )
                for m in fresh
            ]
            docs, after = message_docs(conv, gen, h.rev, nonce, items, stamp)
            if not await self._insert_messages(h, docs, nonce):
                return RETRY
            if request.last_turn_status is not None:
                after["lts"] = request.last_turn_status
            if request.title is not None:
                after["ti"] = request.title
            if merged is not None:
                after["md"] = merged
            fields.update(
                {
                    "c": after,
                    "f": kit.raised_fence(h.fence, request.epoch),
                    "lo": h.owner or principal,
                    "lv": True,
                    "u": touched(h),
                }
            )
            if request.expires_at is not None:
                fields["cx"] = kit.to_micros(request.expires_at)
            if await commit(ctx, h, fields, nonce=nonce):
                return [stored(d) for d in docs]
            if docs:
                await ctx.messages.delete_many({"c": gen, "w": nonce})
            return RETRY

        return await write(ctx, key, attempt, clock=True)

    async def _change(
        self,
        key: ConversationKey,
        principal: str,
        epoch: int | None,
        change: Any,
        *,
        missing_ok: bool = False,
        touch: bool = True,
    ) -> Any:
        """A metadata write to a live conversation: ``change(h, conv)`` returns the new
        conversation entry and extra fields (or ``None`` for no change) and a result."""
        ctx = self.ctx

        async def attempt(h: Header) -> Any:
            if missing_ok and (h.status != LIVE or h.conv is None):
                return None
            if h.status == ERASED:
                raise h.erased_error()
            conv = h.conv
            if conv is None:
                raise refusal_error(Refusal.NOT_FOUND, key=key)
            h.check_write(principal, epoch)
            fields, redo, result = await change(h, dict(conv))
            if fields is None:
                return result
            fields["f"] = kit.raised_fence(h.fence, epoch)
            if touch:
                fields["u"] = touched(h)
            return result if await commit(ctx, h, fields, redo=redo) else RETRY

        return await write(ctx, key, attempt, clock=touch)

    @resent
    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None:
        async def change(h: Header, conv: dict[str, Any]) -> Any:
            conv["lts"] = status
            return {"c": conv}, None, None

        await self._change(key, principal, epoch, change, missing_ok=True)

    @resent
    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        async def change(h: Header, conv: dict[str, Any]) -> Any:
            conv["ti"] = title
            return {"c": conv}, None, None

        await self._change(key, principal, epoch, change)

    @resent
    async def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        async def change(h: Header, conv: dict[str, Any]) -> Any:
            conv["md"] = _merged(conv, updates)
            return {"c": conv}, None, None

        await self._change(key, principal, epoch, change)

    @resent
    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None:
        async def change(h: Header, conv: dict[str, Any]) -> Any:
            members = set(h.get("sh") or ())
            before = set(members)
            if shared:
                members.add(with_principal)
            else:
                members.discard(with_principal)
            if members == before:
                return None, None, None
            return {"sh": sorted(members)}, None, None

        await self._change(key, principal, None, change, touch=False)

    @resent
    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        ctx = self.ctx

        async def change(h: Header, conv: dict[str, Any]) -> Any:
            if expected_tail is not None:
                kit.check_tail(key, conv["tl"], expected_tail)
            assert h.gen is not None
            target = await self._find_message(h.gen, conv["n"], message_id)
            if target is None:
                # A commit since ``h`` (a truncation, its cut already done) may have taken
                # the message: decide again on the fresh header, which is the one that says
                # whether it is gone or the tail moved.
                moved = await ctx.keys.find_one({"_id": h.id}, {"rev": 1})
                if moved is None or moved["rev"] != h.rev:
                    return None, None, RETRY
                raise _no_message(message_id, key)
            role = target["r"]
            keep = cut_position(target["s"], role, cut)
            if keep == target["s"]:
                conv["nu"], conv["na"], conv["lc"] = target["nu"], target["na"], target["pc"]
            else:
                conv["nu"] = target["nu"] + (1 if role == "user" else 0)
                conv["na"] = target["na"] + (1 if role == "assistant" else 0)
                conv["lc"] = target["s"] if target["k"] else target["pc"]
            removed = conv["n"] - keep
            if keep == 0:
                conv["tl"] = None
            elif keep == target["s"] + 1:
                conv["tl"] = target["i"]
            else:
                last = await ctx.messages.find_one({"_id": mid(h.gen, keep - 1)}, {"i": 1})
                if last is None:
                    return None, None, RETRY  # cut by a commit since ``h``: decide again
                conv["tl"] = last["i"]
            before = conv["n"]
            conv["n"] = keep
            return {"c": conv}, [["cut", h.gen, keep, h.rev + 1, before]], removed

        result: int = await self._change(key, principal, epoch, change)
        return result

    @resent
    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        ctx = self.ctx

        async def attempt(nh: Header) -> Retry | None:
            h = await read_header(ctx, key)
            conv = h.conv
            if not h.can_read(principal) or conv is None:
                raise refusal_error(Refusal.NOT_FOUND, key=key)
            assert h.gen is not None
            target = await self._find_message(h.gen, conv["n"], message_id)
            if target is None:
                raise _no_message(message_id, key)
            if nh.status in (LIVE, ERASED):
                raise refusal_error(
                    Refusal.EXISTS, "the branch's key is already in use", key=new_key
                )
            if nh.doc is None:
                await ensure_header(ctx, new_key)
                return RETRY
            fields, gen = nh.claim(principal)
            assert nh.now_us is not None
            now = kit.from_micros(nh.now_us)
            copy = new_conv(nh.now_us)
            copy["ti"] = conv["ti"]
            copy["md"] = [list(pair) for pair in conv.get("md") or ()]
            nonce = kit.writer_nonce_hex()
            last = target["s"]
            for lo in range(0, last + 1, COPY_CHUNK):
                hi = min(last + 1, lo + COPY_CHUNK)
                source = [
                    (uuid.uuid4().hex, d["r"], bool(d["k"]), d["ct"], d["md"])
                    for d in await self._at(h.gen, list(range(lo, hi)))
                ]
                if len(source) != hi - lo:
                    await ctx.messages.delete_many({"c": gen, "w": nonce})
                    return RETRY  # the source was cut under the copy
                docs, copy = message_docs(copy, gen, nh.rev, nonce, source, now)
                await ctx.messages.insert_many(docs, ordered=True)
            still = await ctx.messages.find_one({"_id": mid(h.gen, last)}, {"w": 1, "b": 1})
            if still is None or (still["w"], still["b"]) != (target["w"], target["b"]):
                await ctx.messages.delete_many({"c": gen, "w": nonce})
                return RETRY  # the source was cut under the copy
            fields.update({"c": copy, "lo": principal, "lv": True, "cx": None, "u": nh.now_us})
            if await commit(ctx, nh, fields, nonce=nonce):
                return None
            await ctx.messages.delete_many({"c": gen, "w": nonce})
            return RETRY

        await write(ctx, new_key, attempt, clock=True)

    async def _matches(self, h: Header, rule: SweepRule, now_us: int) -> bool:
        """Whether a live conversation falls under a sweep rule at ``now_us``."""
        d = h.live
        if d is None or d.get("c") is None:
            return False
        if isinstance(rule, Expired):
            return d.get("cx") is not None and d["cx"] <= now_us
        updated = int(d["u"])
        if isinstance(rule, IdleFor):
            return updated < now_us - rule.duration // _US
        assert isinstance(rule, OverCap)
        newer = await self.ctx.keys.count_documents(
            {
                "t": h.key.tenant,
                "lo": d["o"],
                "lv": True,
                "_id": {"$ne": h.id},
                "$or": [{"u": {"$gt": updated}}, {"u": updated, "s": {"$gt": h.key.session_id}}],
            }
        )
        return bool(newer >= rule.keep)

    @resent
    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        ctx = self.ctx

        async def attempt(h: Header) -> bool | Retry:
            d = h.live
            if d is None:
                return False
            if principal is not None and d["o"] != principal:
                raise refusal_error(
                    Refusal.NOT_OWNED, "only the owner may delete a conversation", key=key
                )
            if rule is not None:
                assert h.now_us is not None
                if not await self._matches(h, rule, h.now_us):
                    return False
            tomb: dict[str, Any] = {
                "o": None,
                "sh": [],
                "g": None,
                "sup": None,
                "c": None,
                "cx": None,
                "lo": None,
                "lv": False,
                "st": None,
                "rc": None,
                "rb": None,
                "et": ctx.tombstone_ttl // timedelta(microseconds=1),
            }
            committed = await commit(ctx, h, tomb, stamps=("ea",), redo=[["purge", d["g"]]])
            return True if committed else RETRY

        return await write(ctx, key, attempt, clock=rule is not None)

    # --- reads -------------------------------------------------------------------

    async def _visible(self, key: ConversationKey, principal: str) -> Header | None:
        h = await read_header(self.ctx, key)
        if not h.can_read(principal) or h.conv is None:
            return None
        return h

    @resent
    @snapshot_read
    async def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]:
        h = await self._visible(key, principal)
        if h is None:
            return []
        assert h.gen is not None and h.conv is not None
        n = h.conv["n"]
        end = n if limit is None else min(n, start + limit)
        docs = _covered(h, await self._range(h.gen, start, end), max(0, end - start))
        return [stored(d) for d in docs]

    async def _range(self, gen: str, start: int, end: int) -> list[dict[str, Any]]:
        """The messages at positions ``start <= s < end``, a page of ``_id``s at a time."""
        found: list[dict[str, Any]] = []
        for lo in range(start, end, PAGE):
            found.extend(await self._at(gen, list(range(lo, min(end, lo + PAGE)))))
        return found

    async def _first_at_or_after(self, h: Header, count: int, moment_us: int) -> int:
        """The first position of ``h``'s transcript whose ``created_at`` is at or after
        ``moment_us``: a binary search by position (``created_at`` never decreases along
        the transcript)."""
        assert h.gen is not None
        low, high = 0, count
        while low < high:
            middle = (low + high) // 2
            found = await self.ctx.messages.find_one({"_id": mid(h.gen, middle)}, {"at": 1, "b": 1})
            doc = _one_covered(h, found)
            if doc["at"] >= moment_us:
                high = middle
            else:
                low = middle + 1
        return low

    @resent
    @snapshot_read
    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        h = await self._visible(key, principal)
        if h is None:
            return []
        conv, gen = h.conv, h.gen
        assert conv is not None and gen is not None
        speaker = query.speaker
        size = conv["n"] if speaker == "all" else conv["nu" if speaker == "user" else "na"]
        if query.index is not None:
            i = query.index + size if query.index < 0 else query.index
            if not 0 <= i < size:
                return []
            where = {"_id": mid(gen, i)} if speaker == "all" else {"q": rank_key(gen, speaker, i)}
            doc = _one_covered(h, await self._committed(where, conv["n"]))
            return [transcript_row(i, doc)]
        rank = "s" if speaker == "all" else "rk"
        position, end = 0, conv["n"]
        last_us = None
        if query.time_range is not None:
            first, last = query.time_range
            if first > last:
                return []
            last_us = kit.to_micros(last)
            position = await self._first_at_or_after(h, end, kit.to_micros(first))
        rows: list[TranscriptMessage] = []
        while position < end:
            want = list(range(position, min(end, position + PAGE)))
            page = _covered(h, await self._at(gen, want), len(want))
            for d in page:
                if last_us is not None and d["at"] > last_us:
                    return rows
                if speaker == "all" or d["r"] == speaker:
                    rows.append(transcript_row(d[rank], d))
                    if query.limit is not None and len(rows) >= query.limit:
                        return rows
            position += len(page)
        return rows

    @resent
    @snapshot_read
    async def _recent(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        h = await self._visible(key, principal)
        if h is None:
            return []
        conv, gen = h.conv, h.gen
        assert conv is not None and gen is not None
        found: list[dict[str, Any]] = []
        end = conv["n"]
        while end > 0 and len(found) < limit:
            start = max(0, end - PAGE)
            page = _covered(h, await self._at(gen, list(range(start, end))), end - start)
            found[:0] = [d for d in page if d["r"] in ("user", "assistant")]
            end = start
        return [stored(d) for d in found[-limit:]]

    @resent
    @snapshot_read
    async def _tail(
        self, key: ConversationKey, principal: str, limit: int
    ) -> ConversationTail | None:
        """The header, then the last rows it covers by ``_id`` (one page): two round
        trips, as ``recent``. The transcript is another collection, so no one request
        reads both; the rows' ``b < rev`` makes them the header's own, with no
        transaction."""
        h = await self._visible(key, principal)
        if h is None:
            return None
        assert h.gen is not None and h.conv is not None
        end = h.conv["n"]
        start = max(0, end - limit)
        docs = _covered(h, await self._range(h.gen, start, end), end - start)
        return ConversationTail(_info(key, h), [stored(d) for d in docs])

    @resent
    @snapshot_read
    async def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        h = await self._visible(key, principal)
        if h is None:
            return []
        conv, gen = h.conv, h.gen
        assert conv is not None and gen is not None
        start, end = max(conv["lc"], 0), conv["n"]
        return [stored(d) for d in _covered(h, await self._range(gen, start, end), end - start)]

    @resent
    async def _get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None:
        h = await self._visible(key, principal)
        return None if h is None else _info(key, h)

    @resent
    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page:
        where: dict[str, Any] = {"t": tenant, "lo": principal, "lv": True}
        if cursor is not None:
            updated, session_id = kit.decode_cursor(cursor)
            where["$or"] = [{"u": {"$lt": updated}}, {"u": updated, "s": {"$lt": session_id}}]
        found = self.ctx.keys.find(where, {"rb": 0}).sort([("u", DESCENDING), ("s", DESCENDING)])
        docs = [d async for d in found.limit(limit + 1)]
        items = []
        for d in docs[:limit]:
            key = ConversationKey.from_storage_name(d["_id"])
            items.append(_info(key, Header(key, d, None)))
        next_cursor = None
        if len(docs) > limit and items:
            last = items[-1]
            next_cursor = kit.encode_cursor(kit.to_micros(last.updated_at), last.key.session_id)
        return Page(items, next_cursor)

    @resent
    async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        ctx = self.ctx
        if limit == 0:
            return []
        now_us = kit.to_micros(await ctx.now())
        projection = {"_id": 1, "t": 1, "lo": 1}
        if isinstance(rule, Expired):
            found = ctx.keys.find({"lv": True, "cx": {"$lte": now_us}}, projection)
            return [ConversationKey.from_storage_name(d["_id"]) async for d in found.limit(limit)]
        if isinstance(rule, IdleFor):
            found = ctx.keys.find(
                {"lv": True, "u": {"$lt": now_us - rule.duration // _US}}, projection
            )
            return [ConversationKey.from_storage_name(d["_id"]) async for d in found.limit(limit)]
        assert isinstance(rule, OverCap)
        ordered = ctx.keys.find({"lv": True}, projection).sort(
            [("t", ASCENDING), ("lo", ASCENDING), ("u", DESCENDING), ("s", DESCENDING)]
        )
        keys: list[ConversationKey] = []
        group: tuple[str, str] | None = None
        seen = 0
        async for d in ordered:
            if (d["t"], d["lo"]) != group:
                group, seen = (d["t"], d["lo"]), 0
            seen += 1
            if seen > rule.keep:
                keys.append(ConversationKey.from_storage_name(d["_id"]))
                if len(keys) >= limit:
                    break
        return keys


__all__ = ["MongoConversationStore"]
