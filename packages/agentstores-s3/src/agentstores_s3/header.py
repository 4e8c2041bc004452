"""One bucket prefix of the S3 backend: its layout, key headers and the CAS loop.

Layout under the prefix (no raw id is ever part of an object name)::

    k/<d>/h                       the key header: owner, fence, shares, supervision row,
                                  recording, pause tokens, state pointer, transcript
                                  metadata and its not yet copied-out tail (JSON)
    k/<d>/m/<gen>/<seq:016x>      one object per message (immutable once written)
    k/<d>/i/<gen>/<sha256(id)>    message id -> seq, for idempotent appends
    k/<d>/s/<nonce>               one state blob (a fresh name per save)
    k/<d>/t/<life>/<sha256(id)>   a settled pause token moved out of the header (see
                                  pause_tokens.py; ``life`` is the header's, so a key
                                  created anew after its erasure never sees them)
    k/<d>/turn                    the key's turn, while a writer that kept losing holds
                                  it (see turns.py)
    o/<sha256(tenant, owner)>/<d> listing entries (over-approximate; the header decides)
    oauth/...                     see oauth.py

``d`` is ``ConversationKey.digest``. The header is the key's one commit point: every
write reads it (body + ETag), decides with the kit's key-header rule, and writes it back
with ``If-Match`` (``If-None-Match: *`` when absent), starting again when another writer
got there first. Objects a header does not name (a state blob not yet pointed at,
messages beyond its count, leftovers of an erased key) are ignored by every reader.
Every header carries a fresh writer nonce ``w``: equal headers never share an ETag, and
a write whose reply was lost (a 412 after botocore sent it again) is recognised on
read-back as having landed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from agentstores.errors import (
    BackendUnavailableError,
    ConflictError,
    Refusal,
    UnknownOutcomeError,
    refusal_error,
)
from agentstores.keys import ConversationKey, encode_component
from agentstores.stores import kit

from .client import S3IO, RefusedAfterResend, resent
from .turns import CONTENDED_FOR, Turn

T = TypeVar("T")
Head = dict[str, Any]
"""A key header as stored (see :func:`new_head`), or a tombstone (``erased_until``)."""

ABSENT, EXPIRED, LIVE, ERASED = "absent", "expired", "live", "erased"
CONFLICT_DEADLINE = 30.0
"""Seconds a call keeps writing its header again after losing to other writers before it
gives up with ``ConflictError`` (MongoDB's ``conflict_deadline``). A time, not a count: a
loaded server makes each attempt slow, and 64 attempts (the bound before) were spent in a
few seconds by four processes racing appends on one key."""
BACKOFF_CAP = 0.25
"""The longest pause (seconds, before jitter) between two attempts of one call."""
CACHED_HEADERS = 256
"""Key headers a bundle remembers (the last it read or wrote of each key), so a call can
send requests that follow from the header together with the header's own read, and keep
their results only when the header read back is that very version (same ETag)."""
FRESH_GUESS = 2.0
"""Seconds a remembered header stays a basis for writes sent before the header is read
(an append's copy-outs): about a call's length, so they can only race an erasure as any
write in flight can, never replay rows of a conversation erased long ago."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


def loads(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode())
    except ValueError:
        raise BackendUnavailableError(f"{what} does not parse: the bucket is corrupt") from None


def name_digest(*parts: str) -> str:
    """The hex name a tuple of ids gets in object names."""
    return hashlib.sha256(":".join(encode_component(p) for p in parts).encode()).hexdigest()


class Outcome:
    """What a header transaction decided: the header to write (None: write nothing)
    and the call's result."""

    __slots__ = ("head", "result")

    def __init__(self, head: Head | None, result: Any) -> None:
        self.head, self.result = head, result


@functools.lru_cache(maxsize=4096)
def key_names(key: ConversationKey) -> tuple[str, str]:
    """``(k/<digest>/, storage name)`` of a key (hashing them is on every call's path)."""
    return f"k/{key.digest}/", key.storage_name


class Root:
    """The shared part of every S3 store of one bundle: names, headers, clock, options."""

    def __init__(
        self,
        io: S3IO,
        *,
        clock: Callable[[], datetime] | None = None,
        tombstone_ttl: timedelta = kit.DEFAULT_TOMBSTONE_TTL,
        conditional_delete: bool = True,
    ) -> None:
        self.io = io
        self.clock = clock
        self.tombstone_ttl = tombstone_ttl
        self.conditional_delete = conditional_delete
        self.heads: OrderedDict[str, tuple[str, Head, float]] = OrderedDict()
        self.heads_lock = threading.Lock()
        self.contenders: dict[str, float] = {}
        """When this bundle last lost a race on each key: it reads the key's turn before
        its writes for a while after."""

    # --- clock ---------------------------------------------------------------------

    def now_us(self) -> int:
        if self.clock is not None:
            return kit.to_micros(self.clock())
        return int(self.io.now_seconds() * 1_000_000)

    # --- names ---------------------------------------------------------------------

    @staticmethod
    def key_dir(key: ConversationKey) -> str:
        return key_names(key)[0]

    @staticmethod
    def owner_dir(tenant: str, owner: str) -> str:
        return f"o/{name_digest(tenant, owner)}/"

    # --- headers -------------------------------------------------------------------

    def load(self, key: ConversationKey) -> tuple[Head | None, str | None]:
        """The header of ``key`` and its ETag (``(None, None)`` when absent)."""
        kdir, storage_name = key_names(key)
        found = self.io.get(kdir + "h")
        if found is None:
            self.forget(key)
            return None, None
        head = loads(found[0], "a key header")
        if not isinstance(head, dict) or head.get("key") != storage_name:
            raise refusal_error(
                Refusal.EXISTS, "two keys share a storage digest; refusing to mix them", key=key
            )
        self.remember(key, found[1], head)
        return head, found[1]

    # --- the header cache (see CACHED_HEADERS) ---------------------------------------

    def remember(self, key: ConversationKey, etag: str, head: Head) -> None:
        """``head`` (never changed after this) as the version ``etag`` of ``key``'s
        (only a conversation's: no other call guesses from it)."""
        name = key_names(key)[0]
        with self.heads_lock:
            if head.get("conv") is None:
                self.heads.pop(name, None)
                return
            self.heads[name] = (etag, head, time.monotonic())
            self.heads.move_to_end(name)
            if len(self.heads) > CACHED_HEADERS:
                self.heads.popitem(last=False)

    def forget(self, key: ConversationKey) -> None:
        with self.heads_lock:
            self.heads.pop(key_names(key)[0], None)

    def contend(self, key: ConversationKey) -> None:
        """Another writer won a race on ``key`` against this bundle."""
        with self.heads_lock:
            if len(self.contenders) >= CACHED_HEADERS:
                self.contenders.clear()
            self.contenders[key_names(key)[0]] = time.monotonic()

    def contended(self, key: ConversationKey) -> bool:
        """Whether :meth:`contend` was said of ``key`` within :data:`CONTENDED_FOR` s."""
        at = self.contenders.get(key_names(key)[0])
        return at is not None and time.monotonic() - at < CONTENDED_FOR

    def cached(self, key: ConversationKey) -> tuple[str, Head, float] | None:
        """The last version of ``key``'s header this bundle read or wrote, its ETag and
        how many seconds ago: a guess, never the truth (another writer may have moved it
        since)."""
        with self.heads_lock:
            found = self.heads.get(key_names(key)[0])
        if found is None:
            return None
        return found[0], found[1], time.monotonic() - found[2]

    @staticmethod
    def status(h: Head | None, now: int) -> str:
        if h is None:
            return ABSENT
        until = h.get("erased_until")
        if until is not None:
            return EXPIRED if until <= now else ERASED
        return LIVE

    def read(self, key: ConversationKey) -> tuple[Head | None, str, int]:
        """``(header, status, now)`` for a read."""
        h, _ = self.load(key)
        now = self.now_us()
        return h, self.status(h, now), now

    @staticmethod
    def visible(h: Head | None, status: str, principal: str) -> bool:
        if status != LIVE or h is None:
            return False
        return kit.can_read(
            owner=h["owner"], shared_with=h["shared"], erased=False, principal=principal
        )

    @staticmethod
    def rule_fields(h: Head | None, status: str) -> dict[str, Any]:
        if status == LIVE and h is not None:
            return {"owner": h["owner"], "fence": h["fence"], "erased": False}
        if status == ERASED and h is not None:
            return {"owner": None, "fence": h.get("fence", 0), "erased": True}
        return {"owner": None, "fence": 0, "erased": False}

    def judge(self, h: Head | None, status: str, principal: str, epoch: int | None) -> Any:
        return kit.judge_write(**self.rule_fields(h, status), principal=principal, epoch=epoch)

    @staticmethod
    def erased_until(h: Head | None) -> datetime | None:
        """When a tombstone lapses (store clock), or None for a live or absent key."""
        until = None if h is None else h.get("erased_until")
        return None if until is None else kit.from_micros(until)

    def erased(self, key: ConversationKey, h: Head | None) -> Exception:
        """The ``ErasedError`` of an erased key, saying until when."""
        return refusal_error(Refusal.ERASED, key=key, until=self.erased_until(h))

    def check(
        self, key: ConversationKey, h: Head | None, status: str, principal: str, epoch: int | None
    ) -> None:
        kit.check_write(
            key,
            **self.rule_fields(h, status),
            principal=principal,
            epoch=epoch,
            erased_until=self.erased_until(h) if status == ERASED else None,
        )

    def claim(
        self, key: ConversationKey, h: Head | None, status: str, principal: str, epoch: int | None
    ) -> Head:
        """A copy of the live header after a write by ``principal`` at ``epoch`` (a new
        one when the key is unclaimed), fence raised. The caller has checked the rule."""
        if status == LIVE and h is not None:
            new = dict(h)
        else:
            new = new_head(key, principal)
            entry = self.owner_dir(key.tenant, principal) + key.digest
            self.io.put(entry, dumps([key.tenant, key.session_id]))
        new["fence"] = kit.raised_fence(new["fence"], epoch)
        return new

    def transact(
        self,
        key: ConversationKey,
        decide: Callable[[Head | None, str, int], Outcome],
        first: tuple[Head | None, str | None] | None = None,
        reread: Callable[[], tuple[Head | None, str | None] | None] | None = None,
    ) -> Any:
        """Run ``decide(header, status, now)`` and commit the header it returns with a
        conditional write, again from a fresh read each time another writer won
        (``first``: the header and ETag just read, for the first attempt; ``reread``:
        how a later attempt reads it, None for a plain read)."""
        deadline = time.monotonic() + CONFLICT_DEADLINE
        attempt = 0
        turn = Turn(self, key)
        try:
            while attempt == 0 or time.monotonic() < deadline:
                attempt += 1
                if first is None and attempt > 1 and reread is not None:
                    first = reread()
                h, etag = self.load(key) if first is None else first
                first = None
                now = self.now_us()
                status = self.status(h, now)
                outcome = decide(h, status, now)
                if outcome.head is None:
                    return outcome.result
                if turn.others(now):  # a writer that kept losing goes first
                    time.sleep(_backoff(attempt))
                    continue
                if etag is not None and status == EXPIRED and self.conditional_delete:
                    # The lapsed tombstone goes first (guarded), then the key is created anew.
                    if not self.io.delete(self.key_dir(key) + "h", if_match=etag):
                        continue
                    etag = None
                if self.commit(key, outcome.head, etag):
                    return outcome.result
                turn.lost()
                time.sleep(_backoff(attempt))
            raise ConflictError("the key header kept changing under this write; retry", key=key)
        finally:
            turn.release()

    def commit(self, key: ConversationKey, head: Head, etag: str | None) -> bool:
        """Write ``head`` over the version ``etag`` (absent when None); False when
        another writer changed it first. A write that landed although its reply said
        otherwise (a resend after a lost reply) is recognised by its nonce."""
        nonce = kit.writer_nonce_hex()
        head["w"] = nonce
        name = self.key_dir(key) + "h"
        body = dumps(head)
        self.forget(key)
        try:
            if etag is None:
                put = self.io.put(name, body, if_none_match=True, strict=True)
            else:
                put = self.io.put(name, body, if_match=etag, strict=True)
        except BackendUnavailableError:
            raise
        except RefusedAfterResend as exc:
            # The precondition failed on botocore's resend: against our own earlier
            # attempt (whose reply was lost) or another writer's. Our nonce in the header
            # proves the first; its absence proves nothing, for a writer may have replaced
            # our header since. Retrying from a fresh read could apply the call twice.
            if self._landed(key, nonce):
                return True
            raise UnknownOutcomeError(
                "the S3 write was sent more than once (a reply was lost) and the header "
                "has changed since: it may or may not have taken effect"
            ) from exc
        except ClientError as exc:
            # S3 answered: the write was refused, unless an earlier attempt of botocore's
            # (whose reply was lost) landed.
            if self._landed(key, nonce):
                return True
            if resent(exc):
                raise UnknownOutcomeError(
                    f"the S3 write was sent more than once (a reply was lost), then "
                    f"failed: it may or may not have taken effect: {exc}"
                ) from exc
            raise
        except Exception as exc:
            if self._landed(key, nonce):
                return True
            raise UnknownOutcomeError(
                f"the S3 write may or may not have taken effect: {exc}"
            ) from exc
        if put is not None:
            self.remember(key, put, head)
            return True
        return self._landed(key, nonce)

    def _landed(self, key: ConversationKey, nonce: str) -> bool:
        try:
            h, _ = self.load(key)
        except Exception:
            return False
        return h is not None and h.get("w") == nonce

    def tombstone(self, key: ConversationKey, h: Head) -> Head:
        """The header an erasure leaves: it refuses writes until the TTL lapses."""
        return {
            "key": key.storage_name,
            "fence": h.get("fence", 0),
            "erased_until": self.now_us() + kit.to_micros(kit.UNIX_EPOCH + self.tombstone_ttl),
        }

    def purge(self, key: ConversationKey) -> None:
        """Remove every object of a key but its header (best effort, after the commit)."""
        kdir = self.key_dir(key)
        self.io.delete_many([n for n in self.io.list(kdir) if n != kdir + "h"])


def _backoff(attempt: int) -> float:
    """Seconds to pause before attempt ``attempt + 1`` (jittered, capped)."""
    return float(min(BACKOFF_CAP, 0.001 * 2 ** min(attempt, 8))) * random.random()


def new_head(key: ConversationKey, principal: str) -> Head:
    return {
        "key": key.storage_name,
        "owner": principal,
        "fence": 0,
        "shared": [],
        "sup": None,
        "rec": None,
        "state": None,
        "tokens": {},
        "conv": None,
        "life": kit.writer_nonce_hex(),
    }


__all__ = [
    "ABSENT",
    "ERASED",
    "EXPIRED",
    "LIVE",
    "Head",
    "Outcome",
    "Root",
    "dumps",
    "key_names",
    "loads",
    "name_digest",
    "new_head",
]
