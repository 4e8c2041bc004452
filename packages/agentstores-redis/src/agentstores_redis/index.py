"""The indexes across conversations, kept beside the per-conversation data: listing and
sweeping read them.

    P:ix:{sha(tenant, owner)}   an owner's conversations in a tenant, by updated_at
                                (members: raw session ids)
    P:sw:{sN}:idle              every conversation by updated_at  (members: storage
    P:sw:{sN}:exp               temporary ones by expires_at       names), N = 0..15
    P:sw:{sN}:own               the (tenant, owner) names that have an owner index
                                (removed with the owner's last conversation)

On a cluster these live in other slots than the conversation, so no script can update
them together with it. They are updated in a second, idempotent step right after each
write (kept and retried later in this process when that step fails), and every entry
read from them is checked against the conversation's own header and metadata before it
is used: a stale entry is repaired or dropped, never returned. A process killed between
the two steps leaves a conversation missing from them until :meth:`rebuild`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.stores import Expired, IdleFor, OverCap, SweepRule
from agentstores.stores.kit import after_cursor

from ._base import text
from .client import Call, RedisClient
from .keys import SHARDS, KeySpace, decode_owner_name
from .lua import CONV_INFO, IX_FIX, IX_PAGE
from .metadata import StoredInfo, parse_info, read_infos

log = logging.getLogger(__name__)

SLACK = 4
"""Index entries fetched beyond what a listing still needs (stale ones are skipped)."""
MAX_WINDOW = 1_000_000_000
"""Most index entries one page asks for: more than any owner has, and a count that Lua
numbers (doubles) and ZRANGE's LIMIT both hold exactly, whatever a caller wants (an
``OverCap.keep`` may be 2**63 - 1)."""
RESTARTS = 8
"""How often one listing or sweep restarts after repairing stale entries before it settles."""
MAX_PENDING = 100_000
"""Deferred index updates kept in memory; beyond it the oldest are dropped (with a warning
that :meth:`ConversationIndexes.rebuild` restores what they would have written)."""
_MICROSECOND = timedelta(microseconds=1)

IndexFix = tuple[str, str, int, int | None]
"""A conditional repair: ``(index, member, score seen, new score or None to remove)``."""


class ConversationIndexes:
    """The listing and sweeper indexes of one bundle, with its deferred updates."""

    def __init__(self, client: RedisClient, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys
        self.pending: list[Call] = []
        """Index updates whose second step failed, retried before the next listing or sweep."""

    # --- the second step of every write ---------------------------------------------

    async def touch(
        self, key: ConversationKey, owner: str, updated_us: int, expires_us: int | None = None
    ) -> None:
        """Record ``key``'s new ``updated_at`` (and ``expires_at``) in the indexes; scores
        only move forward, so a late update never undoes a newer one."""
        ks = self.keys
        owned = ks.owner_index(key.tenant, owner)
        idle = ks.idle(ks.shard_of(key))
        registry = ks.owner_registry(ks.owner_shard(key.tenant, owner))
        calls: list[Call] = [
            (None, [owned], ("ZADD", owned, "GT", updated_us, key.session_id)),
            (None, [idle], ("ZADD", idle, "GT", updated_us, ks.member(key))),
            (None, [registry], ("SADD", registry, ks.owner_name(key.tenant, owner))),
        ]
        if expires_us is not None:
            expiring = ks.expiring(ks.shard_of(key))
            calls.append((None, [expiring], ("ZADD", expiring, expires_us, ks.member(key))))
        await self._update(calls)

    async def drop(self, key: ConversationKey, owner: str) -> None:
        """Remove an erased ``key`` from every index, and ``owner`` from the registry
        when it was their last conversation."""
        ks = self.keys
        owned = ks.owner_index(key.tenant, owner)
        idle = ks.idle(ks.shard_of(key))
        expiring = ks.expiring(ks.shard_of(key))
        await self._update(
            [
                (None, [owned], ("ZREM", owned, key.session_id)),
                (None, [idle], ("ZREM", idle, ks.member(key))),
                (None, [expiring], ("ZREM", expiring, ks.member(key))),
            ]
        )
        await self._unregister_if_gone(key.tenant, owner)

    async def _unregister_if_gone(self, tenant: str, owner: str) -> None:
        """Remove ``owner``'s name from the registry once their index is gone (Redis
        deletes a sorted set with its last member), so an owner with no conversation
        left leaves nothing behind.

        The name is removed first and added back if the index exists by then. A write
        adds to the owner index before it registers the owner (one pipeline, in order,
        on a standalone server), so a conversation created meanwhile never stays
        unregistered. On a cluster the two go to different nodes at once: one created in
        the same instant can miss the registry until the owner's next write (or
        :meth:`rebuild`)."""
        ks = self.keys
        owned = ks.owner_index(tenant, owner)
        registry = ks.owner_registry(ks.owner_shard(tenant, owner))
        name = ks.owner_name(tenant, owner)
        try:
            if await self.client.command(owned, "EXISTS", owned):
                return
            await self.client.command(registry, "SREM", registry, name)
            if await self.client.command(owned, "EXISTS", owned):
                await self.client.command(registry, "SADD", registry, name)
        except Exception as exc:  # the sweeper removes a name left behind (_over_cap)
            log.warning("agentstores-redis: owner registry not cleaned up: %s", exc)

    async def _update(self, calls: list[Call]) -> None:
        """Idempotent index updates; the failed ones are kept for :meth:`flush`."""
        try:
            results: list[Any] = await self.client.many(calls)
        except Exception as exc:
            results = [exc] * len(calls)
        failed = [c for c, r in zip(calls, results, strict=True) if isinstance(r, Exception)]
        if failed:
            self.pending.extend(failed)
            if len(self.pending) > MAX_PENDING:
                del self.pending[: len(self.pending) - MAX_PENDING]
                log.warning(
                    "agentstores-redis: deferred index updates dropped; run repair_indexes()"
                )
            log.warning("agentstores-redis: %d index updates deferred", len(failed))

    async def flush(self) -> None:
        """Retry deferred index updates (called before listings and sweeps)."""
        if not self.pending:
            return
        calls, self.pending = self.pending, []
        await self._update(calls)

    async def _repair(self, fixes: list[IndexFix]) -> None:
        """Apply conditional repairs: each only if the member still has the score seen."""
        if not fixes:
            return
        calls: list[Call] = [
            (IX_FIX, [index], [member, seen, "" if new is None else new])
            for index, member, seen, new in fixes
        ]
        await self.client.many(calls)

    # --- listing --------------------------------------------------------------------

    async def owned(
        self, tenant: str, owner: str, cursor: tuple[int, str] | None, want: int
    ) -> list[StoredInfo]:
        """Up to ``want`` of ``owner``'s conversations after ``cursor`` (``updated_us``,
        session id), newest first, each checked against its own metadata (stale entries
        repaired or dropped)."""
        index = self.keys.owner_index(tenant, owner)
        found: list[StoredInfo] = []
        for _restart in range(RESTARTS):
            found = []
            position = cursor
            repaired = False
            while len(found) < want:
                window = min(want - len(found), MAX_WINDOW) + SLACK
                raw = await self.client.read(
                    IX_PAGE, [index], ["" if position is None else str(position[0]), window]
                )
                entries = [
                    (member, score)
                    for member, score in _scored(raw)
                    if after_cursor(score, member, position)
                ]
                if not entries:
                    break
                infos = await read_infos(
                    self.client, self.keys, [ConversationKey(tenant, m) for m, _ in entries]
                )
                fixes: list[IndexFix] = []
                for (member, score), info in zip(entries, infos, strict=True):
                    if info.status != "ok" or info.owner != owner:
                        fixes.append((index, member, score, None))
                    elif info.updated_us != score:
                        fixes.append((index, member, score, info.updated_us))
                        repaired = True
                    elif not repaired:
                        found.append(info)
                await self._repair(fixes)
                if repaired:
                    break
                position = entries[-1][1], entries[-1][0]
                if len(raw) // 2 < window:
                    break
            if not repaired:
                return found[:want]
        # concurrent writers kept moving entries: order what was seen by its own metadata
        found.sort(key=lambda i: (i.updated_us, i.key.session_id if i.key else ""), reverse=True)
        return found[:want]

    # --- sweeping -------------------------------------------------------------------

    async def is_over_cap(self, info: StoredInfo, keep: int) -> bool:
        """Whether ``info`` is not among its owner's ``keep`` most recent conversations."""
        assert info.key is not None
        if keep == 0:
            return True
        newer = await self.owned(info.key.tenant, info.owner, None, keep)
        me = (info.updated_us, info.key.session_id)
        ahead = [i for i in newer if i.key is not None and (i.updated_us, i.key.session_id) > me]
        return len(ahead) >= keep

    async def sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]:
        """Up to ``limit`` conversations ``rule`` matches now, oldest first."""
        await self.flush()
        if limit == 0:
            return []
        if isinstance(rule, OverCap):
            return await self._over_cap(rule.keep, limit)
        now = await self.client.time_us()
        if isinstance(rule, Expired):
            return await self._expired(now, limit)
        if isinstance(rule, IdleFor):
            return await self._idle(now, rule.duration // _MICROSECOND, limit)
        raise UsageError(f"unknown sweep rule {rule!r}")

    async def _shard_candidates(
        self, names: list[str], bound: str, limit: int
    ) -> list[tuple[str, str, int]]:
        """``(index, member, score)`` with score <= bound, oldest first, per shard."""
        calls: list[Call] = [
            (None, [n], ("ZRANGEBYSCORE", n, "-inf", bound, "WITHSCORES", "LIMIT", 0, limit))
            for n in names
        ]
        out: list[tuple[str, str, int]] = []
        for name, reply in zip(names, await self.client.many(calls), strict=True):
            if isinstance(reply, Exception):
                raise reply
            out.extend((name, member, score) for member, score in _scored(reply))
        return out

    async def _expired(self, now: int, limit: int) -> list[ConversationKey]:
        def judge(score: int, info: StoredInfo) -> tuple[int | None, int | None]:
            if info.status == "expired":  # already dropped by the server: a match
                return score, score
            if info.status != "ok" or info.expires_us is None:
                return None, None
            return info.expires_us, info.updated_us if info.expires_us <= now else None

        names = [self.keys.expiring(s) for s in range(SHARDS)]
        return await self._sweep_shards(names, str(now), limit, judge)

    async def _idle(self, now: int, idle_us: int, limit: int) -> list[ConversationKey]:
        before = now - idle_us

        def judge(score: int, info: StoredInfo) -> tuple[int | None, int | None]:
            if info.status != "ok":
                return None, None
            return info.updated_us, info.updated_us if info.updated_us < before else None

        names = [self.keys.idle(s) for s in range(SHARDS)]
        return await self._sweep_shards(names, f"({before}", limit, judge)

    async def _sweep_shards(
        self,
        names: list[str],
        bound: str,
        limit: int,
        judge: Callable[[int, StoredInfo], tuple[int | None, int | None]],
    ) -> list[ConversationKey]:
        """The conversations a sharded sweeper index offers (score up to ``bound``) that
        match, oldest first. ``judge(score, info)`` checks one entry against the
        conversation's own metadata: the score the entry should have (None: remove it)
        and, when the conversation matches, the value it sorts by. Stale entries are
        repaired and the round repeated until it settles."""
        matches: list[tuple[int, str, ConversationKey]] = []
        for _round in range(RESTARTS):
            candidates = await self._shard_candidates(names, bound, limit)
            if not candidates:
                break
            keys = [ConversationKey.from_storage_name(m) for _, m, _ in candidates]
            infos = await read_infos(self.client, self.keys, keys)
            fixes: list[IndexFix] = []
            matches = []
            for (name, member, score), key, info in zip(candidates, keys, infos, strict=True):
                should, order = judge(score, info)
                if should != score:
                    fixes.append((name, member, score, should))
                if order is not None:
                    matches.append((order, key.session_id, key))
            await self._repair(fixes)
            if not fixes or len(matches) >= limit:
                break
        return _oldest(matches, limit)

    async def _over_cap(self, keep: int, limit: int) -> list[ConversationKey]:
        ks = self.keys
        registries = [ks.owner_registry(s) for s in range(SHARDS)]
        owners: list[bytes] = []
        for reply in await self.client.many([(None, [r], ("SMEMBERS", r)) for r in registries]):
            if isinstance(reply, Exception):
                raise reply
            owners.extend(reply)
        matches: list[tuple[int, str, ConversationKey]] = []
        for name in owners:
            tenant, owner = decode_owner_name(text(name))
            entries = await self.owned(tenant, owner, None, MAX_WINDOW)
            if not entries:
                await self._unregister_if_gone(tenant, owner)
            for info in entries[keep:]:
                assert info.key is not None
                matches.append((info.updated_us, info.key.session_id, info.key))
        return _oldest(matches, limit)

    # --- administration -------------------------------------------------------------

    async def rebuild(self) -> int:
        """Re-add every live conversation to the listing and sweeper indexes (after a
        process died between a write and its index step). Returns how many were seen."""
        seen = 0
        for name in await self.client.scan(self.keys.meta_pattern()):
            meta = text(name)
            digest = meta[meta.index("{") + 1 : meta.index("}")]
            header = meta[: -len(":m")] + ":h"
            info = parse_info(await self.client.read(CONV_INFO, [header, meta], ["", "1"]))
            if info.status != "ok" or info.key is None or info.key.digest != digest:
                continue
            seen += 1
            await self.touch(info.key, info.owner, info.updated_us, info.expires_us)
        return seen


def _scored(reply: list[bytes]) -> list[tuple[str, int]]:
    """``(member, score)`` pairs of a ``WITHSCORES`` reply."""
    return [(text(reply[i]), int(float(reply[i + 1]))) for i in range(0, len(reply), 2)]


def _oldest(matches: list[tuple[int, str, ConversationKey]], limit: int) -> list[ConversationKey]:
    matches.sort(key=lambda item: (item[0], item[1]))
    return [key for _, _, key in matches[:limit]]


__all__ = ["ConversationIndexes", "IndexFix"]
