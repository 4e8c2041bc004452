"""The header document: one per conversation key, the commit point of every write to it.

Collection ``<prefix>keys``, ``_id`` = the key's storage name. Fields::

    rev     the CAS version: every commit is ``update_one({_id, rev, sw}, ...)`` judged
            by ``matched_count`` and increments it (never an upsert); the in-place
            supervision swap leaves it, since ``sw`` in every commit's filter already
            orders the two (see :func:`commit`)
    lw      the writer nonce of the last commit (a lost reply is settled by reading it)
    t, s    tenant and session id (listing, sweeping)
    o       owner (None: nobody has written; the key is as good as absent)
    f       the fence as commits set it; the key's fence is the larger of ``f`` and
            the row's epoch (:func:`fence_of`): an in-place takeover raises the row's epoch
            alone, one update path fewer; sh  principals it is shared with
    g       generation: a fresh nonce each time the key is claimed; every other document
            of the key (messages, state versions, tokens) carries it, so what an earlier
            life of the key or a failed write left behind never mixes in
    sup     supervision row, one string ``"<s>|<e>|<w>|<m>"`` (:func:`row_value`); w the
            writer nonce of the in-place swap that wrote it (empty when a commit did);
            hb  its heartbeat ($currentDate)
    c       conversation metadata (None: no conversation) {ti, lts, tl, n, ca, la, nu, na,
            lc}; cx  expires_at; u  updated_at (both microseconds, of the server clock
            for u); lo  listing owner and lv  live flag (only while a conversation exists)
    st      writer nonce of the committed state version, or None
    rc      recording metadata {m, e, i}; rb  its body (read only by recording reads)
    ea, et  erased at ($currentDate) and the tombstone's lifetime in microseconds
    redo    what the last commit left to finish (idempotent; the next writer finishes it)
    sw      the swap token ``"<e>:<o>"`` (the row's epoch, the owner) while a supervision
            CAS may change the row in place (live, not erased, nothing left to finish,
            the row ``running`` and the fence at its epoch), else None: every commit
            recomputes it, so the common CAS filters on ``{_id, sw}`` alone (see
            :func:`swap_token`)
    pw, pa, pt  the turn among contending writers: its holder, when it first lost a
            race and when it last claimed the turn (server microseconds); not part of
            any commit (see :class:`Turn`)

Readers trust only what a header covers: messages with ``s < c.n`` of generation ``g``,
the state version ``st``, tokens marked ``ok`` or named by ``redo``. A document another
writer wrote at the header's current ``rev`` is in flight; one written at an older
``rev`` that the header does not cover can never be committed, and is garbage.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Final, TypeVar

from agentstores.errors import ConflictError, Refusal, refusal_error
from agentstores.keys import ConversationKey
from agentstores.stores import kit

from ._base import Context, aware
from .errors import LostReply, is_connection_error, maybe_sent
from .transcript import mid

ABSENT, EXPIRED, LIVE, ERASED = "absent", "expired", "live", "erased"

NO_BODY: Final = {"rb": 0}
"""Projection of every header read but the recording's: leaves the body on the server."""

T = TypeVar("T")


class Retry:
    """What an attempt returns when it lost a race on the header: read it again."""


RETRY: Final = Retry()


def new_generation() -> str:
    return kit.writer_nonce_hex()


class Header:
    """A header document as read, with its status at the server's clock."""

    __slots__ = ("doc", "id", "key", "now_us", "status")

    def __init__(self, key: ConversationKey, doc: dict[str, Any] | None, now_us: int | None):
        self.key = key
        self.id = key.storage_name
        self.doc = doc
        self.now_us = now_us
        """The server clock read with the header, when it was (microseconds)."""
        if doc is None or (doc.get("o") is None and doc.get("ea") is None):
            self.status = ABSENT
        elif doc.get("ea") is not None:
            assert now_us is not None
            until = kit.to_micros(aware(doc["ea"])) + int(doc.get("et") or 0)
            self.status = ERASED if now_us < until else EXPIRED
        else:
            self.status = LIVE

    @property
    def erased_until(self) -> datetime | None:
        """When an erased key's tombstone lapses (server clock), or None when not erased."""
        if self.status != ERASED or self.doc is None:
            return None
        until = kit.to_micros(aware(self.doc["ea"])) + int(self.doc.get("et") or 0)
        return kit.from_micros(until)

    def erased_error(self) -> Exception:
        """The ``ErasedError`` of this key, saying until when it refuses writes."""
        return refusal_error(Refusal.ERASED, key=self.key, until=self.erased_until)

    @property
    def rev(self) -> int:
        return 0 if self.doc is None else int(self.doc["rev"])

    @property
    def live(self) -> dict[str, Any] | None:
        """The document when the key is live, else None."""
        return self.doc if self.status == LIVE else None

    @property
    def owner(self) -> str | None:
        d = self.live
        return None if d is None else d["o"]

    @property
    def fence(self) -> int:
        d = self.live
        return 0 if d is None else fence_of(d)

    @property
    def gen(self) -> str | None:
        d = self.live
        return None if d is None else d.get("g")

    @property
    def conv(self) -> dict[str, Any] | None:
        d = self.live
        return None if d is None else d.get("c")

    @property
    def row(self) -> dict[str, Any] | None:
        """The supervision row of a live key, decoded (:func:`row_of`)."""
        d = self.live
        return None if d is None else row_of(d)

    def get(self, name: str) -> Any:
        d = self.live
        return None if d is None else d.get(name)

    @property
    def redo(self) -> list[list[Any]]:
        return [] if self.doc is None else list(self.doc.get("redo") or ())

    # --- the key-header rule (the kit's) -------------------------------------------

    def judge(self, principal: str, epoch: int | None) -> Refusal | None:
        return kit.judge_write(
            owner=self.owner,
            fence=self.fence,
            erased=self.status == ERASED,
            principal=principal,
            epoch=epoch,
        )

    def check_write(self, principal: str, epoch: int | None) -> None:
        kit.check_write(
            self.key,
            owner=self.owner,
            fence=self.fence,
            erased=self.status == ERASED,
            principal=principal,
            epoch=epoch,
            erased_until=self.erased_until,
        )

    def can_read(self, principal: str) -> bool:
        d = self.live
        return d is not None and kit.can_read(
            owner=d["o"], shared_with=d.get("sh") or (), erased=False, principal=principal
        )

    def claim(self, principal: str) -> tuple[dict[str, Any], str]:
        """The fields a write sets to claim the key (none when it is live already) and the
        generation the write's documents carry.

        Only what a live key needs is written; what an earlier life left (a tombstone, its
        metadata) is cleared to None, and a field never written stays absent, which every
        reader and query takes as None: a small header is cheaper to match and rewrite."""
        gen = self.gen
        if gen is not None:
            return {}, gen
        gen = new_generation()
        fields: dict[str, Any] = {
            "t": self.key.tenant,
            "s": self.key.session_id,
            "o": principal,
            "f": 0,
            "g": gen,
        }
        left = self.doc or {}
        fields.update({name: None for name in LIFE_FIELDS if left.get(name) is not None})
        if left.get("sh"):
            fields["sh"] = []
        return fields, gen


LIFE_FIELDS: Final = ("sup", "c", "cx", "lo", "lv", "st", "rc", "rb", "ea", "et")
"""Header fields of one life of a key that a claim clears when an earlier life left them."""


def row_value(status: str, message_id: str, epoch: int, nonce: str = "") -> str:
    """The stored ``sup``: the row as one string, ``"<s>|<e>|<w>|<m>"``.

    A string because nx-27017 turns a subdocument ``$set`` into JSON encoding and an
    SQLite ``json()`` call, which cost the common CAS about 15% of the raw floor's time;
    a string is bound as it is. Statuses and epochs never hold ``|`` and nonces are hex,
    so the message id, last, reads back whole whatever it holds."""
    return f"{status}|{epoch}|{nonce}|{message_id}"


def row_of(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The supervision row of header document ``doc`` as ``{s, e, w, m}``, or None."""
    value = doc.get("sup")
    if value is None:
        return None
    status, epoch, nonce, message_id = value.split("|", 3)
    return {"s": status, "e": int(epoch), "w": nonce, "m": message_id}


def fence_of(doc: dict[str, Any]) -> int:
    """The fence of header document ``doc``: ``f``, or the row's epoch when an in-place
    takeover raised it past ``f``. A commit that clears the row writes this into ``f``."""
    fence = int(doc.get("f") or 0)
    row = row_of(doc)
    return fence if row is None else max(fence, row["e"])


def swap_token(epoch: int, owner: str) -> str:
    """The ``sw`` value of a header whose running row has ``epoch``, owned by ``owner``
    (the epoch first: an integer never holds the colon, so any owner reads back whole)."""
    return f"{epoch}:{owner}"


def swappable(doc: dict[str, Any]) -> str | None:
    """The ``sw`` a header document ``doc`` carries: the swap token when the in-place
    CAS's conditions all hold (owned, not erased, nothing left to finish, a ``running``
    row, the fence at the row's epoch), else None."""
    owner, row = doc.get("o"), row_of(doc)
    if owner is None or row is None or doc.get("ea") is not None or doc.get("redo"):
        return None
    if row["s"] != "running" or fence_of(doc) != row["e"]:
        return None
    return swap_token(row["e"], owner)


# --- reading ---------------------------------------------------------------------------


async def read_header(
    ctx: Context, key: ConversationKey, *, body: bool = False, clock: bool = False
) -> Header:
    """The header from the primary. The server clock is read with it when ``clock`` is
    set (concurrently), else only when a tombstone needs it."""
    find = ctx.keys.find_one({"_id": key.storage_name}, None if body else NO_BODY)
    now_us = None
    if clock:
        doc, now = await asyncio.gather(find, ctx.now())
        now_us = kit.to_micros(now)
    else:
        doc = await find
        if doc is not None and doc.get("ea") is not None:
            now_us = kit.to_micros(await ctx.now())
    return Header(key, doc, now_us)


async def read_with_clock(ctx: Context, key: ConversationKey) -> tuple[Header, datetime]:
    """The header and the server clock, read concurrently."""
    h = await read_header(ctx, key, clock=True)
    assert h.now_us is not None
    return h, kit.from_micros(h.now_us)


def touched(h: Header) -> int:
    """``updated_at`` for a commit on ``h``: the server clock read with it, never below the
    value it replaces (two writers' clock readings may commit out of order).

    Queryable times are integers: nx-27017 reads ``$currentDate`` stamps back right but
    cannot compare them in queries (see the fidelity tests)."""
    assert h.now_us is not None, "read the header with clock=True"
    before = h.get("u")
    return h.now_us if before is None else max(int(before), h.now_us)


# --- committing ------------------------------------------------------------------------


async def finish(ctx: Context, redo: list[list[Any]]) -> None:
    """Apply what a committed header left to finish. Each step is idempotent and touches
    only documents no later commit can reuse (generations and nonces are never reused)."""
    for step in redo:
        kind = step[0]
        if kind == "purge":
            gen = step[1]
            await ctx.messages.delete_many({"c": gen})
            await ctx.state.delete_many({"g": gen})
            await ctx.tokens.delete_many({"g": gen})
        elif kind == "state":
            await ctx.state.delete_one({"g": step[1], "w": step[2]})
        elif kind == "token":
            await ctx.tokens.update_one(
                {"g": step[1], "t": step[2], "w": step[3]}, {"$set": {"ok": True}}
            )
        elif kind == "cut":
            await cut(ctx, *step[1:])


CUT_CHUNK = 1000
"""Positions one delete of a truncation's cut names."""


async def cut(ctx: Context, gen: str, keep: int, before_rev: int, count: int) -> None:
    """Delete the messages a truncation dropped (positions ``keep .. count - 1``, written
    before the truncation's commit ``before_rev``), named by ``_id``: the ``_id`` index
    serves it on every server (nx-27017 scans the collection for a compound-index range,
    so a cut by ``{c, s: {$gte}}`` cost as much as the transcript is long)."""
    for lo in range(keep, count, CUT_CHUNK):
        ids = [mid(gen, seq) for seq in range(lo, min(count, lo + CUT_CHUNK))]
        await ctx.messages.delete_many({"_id": {"$in": ids}, "b": {"$lt": before_rev}})


async def finish_quietly(ctx: Context, redo: list[list[Any]]) -> None:
    """Finish what a committed header left, ignoring failures: the write already took
    effect, and the next writer of the key finishes ``redo`` before its own commit."""
    if not redo:
        return
    try:
        await finish(ctx, redo)
    except Exception:
        return


async def ensure_header(ctx: Context, key: ConversationKey) -> None:
    """Create the bare header of an unwritten key (create-if-absent by ``insert_one``; a
    duplicate key means it exists). A bare header is as good as absent to every rule."""
    from pymongo.errors import DuplicateKeyError

    try:
        await ctx.keys.insert_one(
            {"_id": key.storage_name, "rev": 0, "t": key.tenant, "s": key.session_id, "o": None}
        )
    except DuplicateKeyError:
        return


async def commit(
    ctx: Context,
    h: Header,
    fields: dict[str, Any],
    *,
    stamps: tuple[str, ...] = (),
    redo: list[list[Any]] | None = None,
    nonce: str | None = None,
    expect: dict[str, Any] | None = None,
) -> bool:
    """CAS the header from ``h.rev`` to ``h.rev + 1`` with ``fields`` set and ``stamps``
    set to the server clock; True iff this call's update landed.

    The filter names the swap token ``h`` read as well as its ``rev``: an in-place
    supervision swap does not bump ``rev`` (one update path fewer on the common CAS),
    and every swap that changes the fence or leaves the row not running changes ``sw``,
    so a commit judged on the header before such a swap can never land after it. A
    heartbeat keeps ``sw`` (same epoch, still running) and may land in between; a
    commit that judged the row's other fields names them in ``expect``.

    What ``h`` left to finish is finished first (this commit replaces it). A reply lost
    after sending is settled by reading the header back (:func:`reconcile`).
    """
    if h.doc is None:
        raise RuntimeError("commit needs a header document; call ensure_header first")
    if h.redo:
        await finish(ctx, h.redo)
    nonce = nonce or kit.writer_nonce_hex()
    turn = TURN.get()
    if turn is not None and h.doc.get("pw") == turn:
        fields = {**fields, "pw": None}
    after = {**h.doc, **fields, "redo": redo}
    if "ea" in stamps:
        after["ea"] = True
    update: dict[str, Any] = {
        "$set": {**fields, "rev": h.rev + 1, "lw": nonce, "redo": redo, "sw": swappable(after)}
    }
    if stamps:
        update["$currentDate"] = {name: True for name in stamps}
    try:
        result = await ctx.keys.update_one(commit_filter(h, expect), update)
    except Exception as exc:
        if not maybe_sent(exc):
            raise
        landed = await reconcile(ctx, h, nonce, exc)
    else:
        landed = result.matched_count == 1
    if landed:
        await finish_quietly(ctx, redo or [])
    return landed


def commit_filter(h: Header, expect: dict[str, Any] | None = None) -> dict[str, Any]:
    """The filter of a commit on ``h``: its ``rev``, and its swap token while it has one
    (a header without one cannot be swapped in place until a commit gives it one)."""
    assert h.doc is not None
    where: dict[str, Any] = {"_id": h.id, "rev": h.rev}
    token = h.doc.get("sw")
    if token is not None:
        where["sw"] = token
    if expect:
        where.update(expect)
    return where


async def reconcile(ctx: Context, h: Header, nonce: str, cause: BaseException) -> bool:
    """Whether a commit whose reply was lost landed: the header's ``lw`` says so while it
    is the last commit; a header still at ``h.rev`` is bumped so the lost update can never
    land later. Raises ``LostReply`` when the header has moved past any trace of it."""
    deadline = time.monotonic() + ctx.reconcile_window
    while True:
        try:
            doc = await ctx.keys.find_one({"_id": h.id}, {"rev": 1, "lw": 1})
            if doc is None:
                return False
            if doc.get("lw") == nonce:
                return True
            if doc["rev"] == h.rev:
                bumped = await ctx.keys.update_one(
                    {"_id": h.id, "rev": h.rev}, {"$inc": {"rev": 1}}
                )
                if bumped.matched_count == 1:
                    return False
                continue
            if doc["rev"] == h.rev + 1:
                return False  # the one commit after h.rev was another writer's
            raise LostReply(f"{cause}; the header has moved on since")
        except LostReply:
            raise
        except Exception as exc:
            if not is_connection_error(exc) or time.monotonic() > deadline:
                raise LostReply(f"{cause}; reading back failed too: {exc}") from exc
            await asyncio.sleep(0.1)


async def retire(ctx: Context, h: Header) -> None:
    """Another writer's uncommitted documents at ``h.rev`` are in our way: give it
    ``ctx.stall_after`` seconds to commit or give up, then bump the header's ``rev`` so
    its commit can never land and its documents become garbage."""
    deadline = time.monotonic() + ctx.stall_after
    pause = 0.001
    while time.monotonic() < deadline:
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.02)
        doc = await ctx.keys.find_one({"_id": h.id}, {"rev": 1})
        if doc is None or doc["rev"] != h.rev:
            return
    await ctx.keys.update_one({"_id": h.id, "rev": h.rev}, {"$inc": {"rev": 1}})


TURN: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentstores_mongo_turn", default=None
)
"""The turn id of the write running in this task, while it holds the key's turn (its
commit clears the turn in the same update)."""


class Turn:
    """One write's place among the writers contending for a key, so that none starves.

    Without it the writer that just won a race starts its next write at once while the
    losers are still noticing they lost, and a loser can lose every round for as long as
    the others keep writing. A writer that loses records itself in the header as the
    turn holder (``pw``; ``pa`` the server time it first lost, ``pt`` when it last
    claimed) unless an older loser holds it; every other writer that reads a fresh turn
    of someone else's waits for the header to move (a commit, or the turn cleared) before
    its next attempt, so the oldest loser contends only with writes already in flight.
    The turn is not a commit (``rev`` stays): a turn older than ``ctx.stall_after`` (its
    holder gone) is ignored and taken over."""

    __slots__ = ("ctx", "first_us", "held", "id", "key")

    def __init__(self, ctx: Context, key: ConversationKey) -> None:
        self.ctx = ctx
        self.key = key
        self.id = kit.writer_nonce_hex()
        self.first_us: int | None = None
        """The server time of this write's first lost race (its age in the queue)."""
        self.held = False

    def _fresh(self, doc: dict[str, Any], now_us: int) -> bool:
        return now_us - int(doc.get("pt") or 0) < self.ctx.stall_after * 1_000_000

    async def _now_us(self, h: Header) -> int:
        return h.now_us if h.now_us is not None else kit.to_micros(await self.ctx.now())

    async def lost(self, h: Header) -> None:
        """After a lost race on ``h``: claim the turn unless an older loser holds it."""
        now_us = await self._now_us(h)
        if self.first_us is None:
            self.first_us = now_us
        doc = h.doc or {}
        holder = doc.get("pw")
        older = holder not in (None, self.id) and int(doc.get("pa") or 0) <= self.first_us
        if older and self._fresh(doc, now_us):
            return
        claimed = await self.ctx.keys.update_one(
            {"_id": h.id, "pw": holder},
            {"$set": {"pw": self.id, "pa": self.first_us, "pt": now_us}},
        )
        self.held = self.held or claimed.matched_count == 1

    async def wait_for_older(self, h: Header) -> bool:
        """True (after waiting for the header to move) when another writer holds a fresh
        turn on ``h`` and this write is not older: read the header again."""
        doc = h.doc or {}
        holder = doc.get("pw")
        if holder in (None, self.id):
            return False
        if self.first_us is not None and self.first_us < int(doc.get("pa") or 0):
            return False
        if not self._fresh(doc, await self._now_us(h)):
            return False
        deadline = time.monotonic() + self.ctx.stall_after
        pause = 0.001
        while time.monotonic() < deadline:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.01)
            now = await self.ctx.keys.find_one({"_id": h.id}, {"rev": 1, "pw": 1})
            if now is None or now["rev"] != h.rev or now.get("pw") != holder:
                break
        return True

    async def release(self) -> None:
        """Give the turn back when this write ended without a commit that cleared it."""
        if self.held:
            self.held = False
            await self.ctx.keys.update_one(
                {"_id": self.key.storage_name, "pw": self.id}, {"$set": {"pw": None}}
            )


async def write(
    ctx: Context,
    key: ConversationKey,
    attempt: Callable[[Header], Awaitable[T | Retry]],
    *,
    body: bool = False,
    clock: bool = False,
) -> T:
    """Run ``attempt`` on fresh reads of the header (with the server clock when
    ``clock`` is set) until it does not lose a race, taking turns with the other writers
    of the key (:class:`Turn`)."""
    deadline = time.monotonic() + ctx.conflict_deadline
    turn = Turn(ctx, key)
    token = TURN.set(turn.id)
    try:
        while True:
            h = await read_header(ctx, key, body=body, clock=clock)
            if await turn.wait_for_older(h):
                continue
            outcome = await attempt(h)
            if not isinstance(outcome, Retry):
                return outcome
            if time.monotonic() > deadline:
                raise ConflictError("the key kept changing under this write; retry", key=key)
            if h.doc is not None:  # a race lost on the header (not its creation)
                await turn.lost(h)
    finally:
        TURN.reset(token)
        if turn.held:
            with contextlib.suppress(Exception):
                await turn.release()


def not_found(key: ConversationKey, message: str = "") -> Exception:
    return refusal_error(Refusal.NOT_FOUND, message, key=key)


__all__ = [
    "ABSENT",
    "ERASED",
    "EXPIRED",
    "LIFE_FIELDS",
    "LIVE",
    "NO_BODY",
    "RETRY",
    "TURN",
    "Header",
    "Retry",
    "Turn",
    "commit",
    "commit_filter",
    "cut",
    "ensure_header",
    "fence_of",
    "finish",
    "finish_quietly",
    "new_generation",
    "not_found",
    "read_header",
    "read_with_clock",
    "reconcile",
    "retire",
    "row_of",
    "row_value",
    "swap_token",
    "swappable",
    "touched",
    "write",
]
