"""Every request the S3 backend makes goes through one ``S3IO``: blocking boto3 calls
(the stores run them off the event loop), conditional writes, and the store clock.

Conditional writes are the only atomic primitive: ``put(..., if_none_match=True)``
creates, ``put(..., if_match=etag)`` swaps, ``delete(..., if_match=etag)`` removes. A
precondition that does not hold comes back as ``False`` (412, or 404 for ``If-Match`` on
a missing object); ``409 ConditionalRequestConflict`` (a concurrent conditional write in
flight) is retried with bounded, jittered backoff. :class:`RequestStats` counts requests
and rounds (waits for the server: a request made alone is one, requests sent together
are one), so tests can check what a call costs at 100,000 messages and at 10.

The store clock is the server's: every response's ``Date`` header (1 s resolution) moves
a lower bound of the offset between this machine's clock and the server's; ``now()`` is
the local clock plus that offset, never going backwards.
"""

from __future__ import annotations

import builtins
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from agentstores.errors import BackendUnavailableError

T = TypeVar("T")

CONFLICT_RETRIES = 8
"""How many times a write answered ``409 ConditionalRequestConflict`` is sent again."""
DEFAULT_RECONNECT_WINDOW = 15.0
"""Seconds a call keeps trying while the endpoint refuses connections (after botocore's
own attempts), so a server restart stalls calls instead of failing them."""
CLOCK_REFRESH = 30.0
"""Seconds after which ``now()`` asks the server for a fresh ``Date`` before answering."""

_PRECONDITION = {"PreconditionFailed", "412"}
_MISSING = {"NoSuchKey", "404", "NotFound"}
_CONFLICT = {"ConditionalRequestConflict", "409", "OperationAborted"}
_CUT_BODY = (ResponseStreamingError, IncompleteReadError, ReadTimeoutError, ConnectionClosedError)
"""What reading a reply's body raises when the connection ends before the body does."""


_group = threading.local()
"""``_group.on`` is set on a thread while it sends one of a group of requests sent
together (see :func:`grouped`): those count as one round between them."""


@dataclass
class RequestStats:
    """Requests by kind, and rounds: how many times a call waited for the server (a
    request made alone is a round; a group of requests sent together is one). Shared by
    every thread of one ``S3IO``."""

    gets: int = 0
    puts: int = 0
    deletes: int = 0
    lists: int = 0
    heads: int = 0
    rounds: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, kind: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, kind, getattr(self, kind) + n)

    @property
    def total(self) -> int:
        """Requests (rounds are not requests)."""
        return self.gets + self.puts + self.deletes + self.lists + self.heads

    def reset(self) -> None:
        with self.lock:
            self.gets = self.puts = self.deletes = self.lists = self.heads = self.rounds = 0

    def snapshot(self) -> dict[str, int]:
        return {
            "gets": self.gets,
            "puts": self.puts,
            "deletes": self.deletes,
            "lists": self.lists,
            "heads": self.heads,
            "rounds": self.rounds,
        }


def grouped(fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` marked as one request of a group sent together: its requests add no round
    of their own (whoever sends the group counts it)."""

    def run() -> T:
        _group.on = True
        try:
            return fn()
        finally:
            _group.on = False

    return run


def error_code(exc: ClientError) -> str:
    """The S3 error code of a failed call, or its HTTP status as text."""
    code = exc.response.get("Error", {}).get("Code")
    if code:
        return str(code)
    return str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))


def bare_etag(etag: str) -> str:
    """An ETag without the double quotes of its HTTP form (``W/`` weak tags are never
    made by S3 for objects)."""
    return etag[1:-1] if len(etag) >= 2 and etag[0] == etag[-1] == '"' else etag


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def resent(exc: ClientError) -> bool:
    """Whether botocore sent the request more than once before this answer: an earlier
    attempt, whose reply was lost or timed out, may have landed."""
    return bool(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0))


class RefusedAfterResend(Exception):
    """A conditional write's precondition failed on a resend: the write itself may have
    landed on an earlier attempt (then the precondition fails against it)."""


class ServerClock:
    """The server's clock as seen through ``Date`` headers: a lower bound of its offset
    from the local clock, raised by every response; monotonic within a process."""

    def __init__(self) -> None:
        self.offset: float | None = None
        self.seen_at = 0.0
        self.last = 0.0
        self.stamp = ""
        self.lock = threading.Lock()

    def observe(self, headers: dict[str, str] | None) -> None:
        stamp = (headers or {}).get("date")
        if not stamp:
            return
        if stamp == self.stamp:
            # The same second as the last reply seen, and later on the local clock: a
            # smaller offset than the one already kept, so only freshness changes.
            self.seen_at = time.monotonic()
            return
        try:
            server = parsedate_to_datetime(stamp).timestamp()
        except (TypeError, ValueError):
            return
        local = time.time()
        with self.lock:
            # The server's clock read [server, server + 1) when it answered, before now:
            # server - local is a lower bound of the offset; the largest seen is kept.
            offset = server - local
            if self.offset is None or offset > self.offset:
                self.offset = offset
            self.seen_at = time.monotonic()
            self.stamp = stamp

    def stale(self) -> bool:
        return self.offset is None or time.monotonic() - self.seen_at > CLOCK_REFRESH

    def now(self) -> float:
        """Seconds since the Unix epoch on the server's clock (never decreasing)."""
        with self.lock:
            value = time.time() + (self.offset or 0.0)
            if value < self.last:
                value = self.last
            self.last = value
            return value


_clocks: dict[tuple[int, str, str], ServerClock] = {}
_clocks_lock = threading.Lock()


def shared_clock(endpoint: str, bucket: str) -> ServerClock:
    """The one clock estimate of a process for a bucket: every bundle feeds it, so they
    all agree (and never go backwards), and it tightens with every response seen."""
    import os

    with _clocks_lock:
        key = (os.getpid(), endpoint, bucket)
        clock = _clocks.get(key)
        if clock is None:
            clock = _clocks[key] = ServerClock()
        return clock


class S3IO:
    """One bucket and prefix on one boto3 client (thread-safe; one per bundle)."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        stats: RequestStats | None = None,
        *,
        endpoint: str = "",
        reconnect_window: float = DEFAULT_RECONNECT_WINDOW,
        quoted_if_match: bool = True,
    ):
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.stats = stats
        self.quoted_if_match = quoted_if_match
        self.clock = shared_clock(endpoint, bucket)
        self.reconnect_window = reconnect_window

    # --- bookkeeping -------------------------------------------------------------

    def _count(self, kind: str) -> None:
        if self.stats is not None:
            self.stats.count(kind)
            if not getattr(_group, "on", False):
                self.stats.count("rounds")

    def _seen(self, response: dict[str, Any]) -> None:
        self.clock.observe(response.get("ResponseMetadata", {}).get("HTTPHeaders"))

    def _call(self, kind: str, method: str, **kwargs: Any) -> dict[str, Any]:
        """One boto3 call; 409 conflicts retried with backoff, the clock fed; sent again
        while the endpoint refuses connections, for up to ``reconnect_window`` seconds
        (safe for every request: a conditional write that landed before is recognised
        by its nonce, and every unconditional one writes the same bytes or a fresh name)."""
        unreachable_since: float | None = None
        attempt = 0
        while True:
            self._count(kind)
            try:
                response: dict[str, Any] = getattr(self.client, method)(**kwargs)
            except (EndpointConnectionError, ConnectTimeoutError):
                now = time.monotonic()
                if unreachable_since is None:
                    unreachable_since = now
                if now - unreachable_since >= self.reconnect_window:
                    raise
                time.sleep(min(0.5, self.reconnect_window - (now - unreachable_since)))
                continue
            except ClientError as exc:
                self._seen(exc.response)
                if error_code(exc) in _CONFLICT or _status(exc) == 409:
                    if attempt < CONFLICT_RETRIES:
                        time.sleep(min(1.0, 0.02 * 2**attempt) * (0.5 + random.random()))
                        attempt += 1
                        continue
                    raise BackendUnavailableError(
                        f"S3 kept answering 409 ConditionalRequestConflict "
                        f"({CONFLICT_RETRIES + 1} attempts)",
                        exhausted=True,
                    ) from exc
                raise
            self._seen(response)
            return response

    # --- the store clock -----------------------------------------------------------

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.now_seconds(), UTC)

    def now_seconds(self) -> float:
        """The store clock as seconds since the Unix epoch."""
        if self.clock.stale():
            self.head_bucket()
        return self.clock.now()

    def head_bucket(self) -> None:
        self._call("heads", "head_bucket", Bucket=self.bucket)

    # --- objects -------------------------------------------------------------------

    def get(self, name: str) -> tuple[bytes, str] | None:
        """``(body, etag)`` of the object ``prefix + name``, or None when absent.

        A reply cut in its body (the server died or the connection broke after the
        headers) is asked for again, for up to ``reconnect_window`` seconds: a read
        changes nothing, and botocore does not retry a body it has handed over."""
        cut_since: float | None = None
        while True:
            try:
                response = self._call(
                    "gets", "get_object", Bucket=self.bucket, Key=self.prefix + name
                )
            except ClientError as exc:
                if error_code(exc) in _MISSING or _status(exc) == 404:
                    return None
                raise
            try:
                return response["Body"].read(), str(response["ETag"])
            except _CUT_BODY:
                now = time.monotonic()
                cut_since = now if cut_since is None else cut_since
                if now - cut_since >= self.reconnect_window:
                    raise

    def _if_match(self, etag: str) -> str:
        """``etag`` as the ``If-Match`` header carries it: quoted as the server sent it
        (RFC 9110, AWS), or bare for stores that compare the header to the bare ETag and
        refuse the quoted form (Ceph RGW 16, DigitalOcean Spaces)."""
        return etag if self.quoted_if_match else bare_etag(etag)

    def put(
        self,
        name: str,
        body: bytes,
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        strict: bool = False,
    ) -> str | None:
        """Write ``body``; the new ETag, or None when the precondition did not hold
        (``strict``: :class:`RefusedAfterResend` when it failed on a resend)."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + name, "Body": body}
        if if_match is not None:
            kwargs["IfMatch"] = self._if_match(if_match)
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        try:
            response = self._call("puts", "put_object", **kwargs)
        except ClientError as exc:
            code = error_code(exc)
            refused = code in _PRECONDITION or _status(exc) == 412
            if if_match is not None and (code in _MISSING or _status(exc) == 404):
                refused = True
            if not refused:
                raise
            if strict and resent(exc):
                raise RefusedAfterResend(code) from exc
            return None
        return str(response["ETag"])

    def delete(self, name: str, *, if_match: str | None = None) -> bool:
        """Remove the object; False when ``if_match`` did not hold."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + name}
        if if_match is not None:
            kwargs["IfMatch"] = self._if_match(if_match)
        try:
            self._call("deletes", "delete_object", **kwargs)
        except ClientError as exc:
            code = error_code(exc)
            if code in _PRECONDITION or _status(exc) == 412:
                return False
            if code in _MISSING or _status(exc) == 404:
                return if_match is None
            raise
        return True

    def list(self, under: str) -> builtins.list[str]:
        """Every object name (without the bucket prefix) under ``prefix + under``."""
        names: builtins.list[str] = []
        token: str | None = None
        cut = len(self.prefix)
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix + under}
            if token is not None:
                kwargs["ContinuationToken"] = token
            response = self._call("lists", "list_objects_v2", **kwargs)
            names.extend(item["Key"][cut:] for item in response.get("Contents", ()))
            if not response.get("IsTruncated"):
                return names
            token = response.get("NextContinuationToken")

    def delete_many(self, names: builtins.list[str]) -> None:
        """Remove objects in batches of 1,000 (unconditional; missing ones are fine)."""
        for start in range(0, len(names), 1000):
            chunk = names[start : start + 1000]
            if len(chunk) == 1:
                self.delete(chunk[0])
                continue
            self._call(
                "deletes",
                "delete_objects",
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": self.prefix + n} for n in chunk], "Quiet": True},
            )


__all__ = [
    "CONFLICT_RETRIES",
    "DEFAULT_RECONNECT_WINDOW",
    "S3IO",
    "RefusedAfterResend",
    "RequestStats",
    "ServerClock",
    "error_code",
    "grouped",
    "resent",
]
