"""``S3Stores``: every store on one bucket prefix of an S3-compatible object store.

URL: ``s3://bucket[/prefix]?region=...&endpoint_url=...``. Options, as keyword arguments
or URL query parameters: ``region``, ``endpoint_url`` (MinIO, R2, Ceph, moto ...),
``profile`` (a named profile of the standard credential chain), ``addressing_style``
(``auto`` | ``path`` | ``virtual``), ``workers`` (32: threads and HTTP connections of the
bundle's pool, where every blocking boto3 call runs), ``max_attempts`` (5: botocore's
standard retry mode, which backs off on throttling and 5xx), ``connect_timeout`` and
``read_timeout`` (seconds), ``reconnect_window`` (15 s: how long a call keeps trying
while the endpoint refuses connections, as during a server restart; 0 to fail at once),
``tombstone_ttl`` (seconds or a timedelta; 30 days; at most 100 years),
``conditional_delete`` (``true``: deletes use ``DeleteObject`` with ``If-Match``; ``false``
for stores that ignore it, e.g. MinIO and Ceph RGW: a conditional tombstone write
instead), ``quoted_if_match`` (``true``: ``If-Match`` carries the ETag quoted, as the
server sent it; ``false`` for stores that refuse that form, e.g. Ceph RGW 16) and
``concurrent_requests`` (``true``: a call's requests that do not depend on each other go
together, guessed from the header the bundle saw last where they follow from it, so an
append waits for the server twice and a read by index once at any length; ``false``:
one after another; see the README).

Credentials always come from boto3's standard chain (environment, shared files, instance
roles); none is taken from the URL, and neither the URL nor a credential is ever logged.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from agentstores.errors import BackendUnavailableError, UsageError
from agentstores.stores import Stores
from agentstores.stores.kit import from_micros, tombstone_ttl, url_options
from agentstores.urls import redact_url

from ._base import DEFAULT_WORKERS, Runner
from .client import DEFAULT_RECONNECT_WINDOW, S3IO, RequestStats
from .conversations import S3ConversationStore
from .errors import translate
from .header import Root
from .oauth import S3OAuthStore
from .pause_tokens import S3PauseTokenStore
from .plugin import BACKEND
from .recording import S3RecordingStore
from .state import S3AgentStateStore
from .supervision import S3SupervisionStore
from .transcript import WINDOW

URL_OPTIONS = (
    "region",
    "endpoint_url",
    "profile",
    "addressing_style",
    "workers",
    "max_attempts",
    "connect_timeout",
    "read_timeout",
    "reconnect_window",
    "tombstone_ttl",
    "conditional_delete",
    "quoted_if_match",
    "concurrent_requests",
)
_HINT = " (credentials come from the standard boto3 chain; clock is a keyword argument)"


def flag_option(value: Any, name: str) -> bool:
    """A boolean option given as a bool or as URL text (``true``/``false``, ``1``/``0``,
    ``yes``/``no``, ``on``/``off``); anything else is a :class:`UsageError`."""
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"s3 option {name} must be true or false, got {value!r}")


def _number(value: Any, name: str, kind: type = float) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise UsageError(f"s3 option {name} must be a number, got {value!r}") from None
    if number <= 0:
        raise UsageError(f"s3 option {name} must be positive, got {value!r}")
    return number


def _seconds(value: Any, name: str) -> float:
    """A duration that may be zero."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"s3 option {name} must be a number, got {value!r}") from None
    if number < 0:
        raise UsageError(f"s3 option {name} must not be negative, got {value!r}")
    return number


def parse_url(url: str, options: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(bucket, prefix, options)``; URL options merged under the keyword ones."""
    if not isinstance(url, str) or not url.startswith("s3://"):
        raise UsageError(f"not an s3:// URL: {redact_url(url)!r}")
    parts = urlsplit(url)
    if parts.username or parts.password:
        raise UsageError("credentials are never taken from an s3:// URL; use the boto3 chain")
    bucket = parts.hostname or ""
    if not bucket:
        raise UsageError("an s3:// URL names a bucket: s3://bucket[/prefix]")
    prefix = parts.path.strip("/")
    if prefix:
        prefix += "/"
    merged = dict(url_options(url, URL_OPTIONS, backend=BACKEND.name, hint=_HINT))
    for name, value in options.items():
        if name not in URL_OPTIONS:
            raise UsageError(f"unknown s3 option {name!r}; known: {', '.join(URL_OPTIONS)}")
        if value is not None:
            merged[name] = value
    if "endpoint_url" in merged:
        _check_endpoint(str(merged["endpoint_url"]))
    return bucket, prefix, merged


def _check_endpoint(endpoint: str) -> None:
    """Refuse an ``endpoint_url`` carrying a user, a password or a query: boto3 signs
    with the credential chain and ignores them, and botocore repeats the endpoint
    verbatim in its errors, so a secret there would reach every connection error."""
    parts = urlsplit(endpoint)
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            "credentials are never taken from the s3 endpoint_url; use the boto3 chain "
            f"(endpoint_url={redact_url(endpoint)!r})"
        )
    if parts.query or parts.fragment:
        raise UsageError(
            "the s3 endpoint_url is scheme://host[:port][/path], without a query: got "
            f"{parts.scheme}://{parts.netloc}{parts.path} with one"
        )


_sessions: dict[tuple[int, str | None], Any] = {}
_sessions_lock = threading.Lock()


def _session(profile: str | None) -> Any:
    """One boto3 session per profile and process: its loaded service models are reused by
    every bundle's client (making a client from a fresh session costs ~100 ms)."""
    import boto3

    with _sessions_lock:
        found = _sessions.get((os.getpid(), profile))
        if found is None:
            found = boto3.session.Session(profile_name=profile)
            _sessions[(os.getpid(), profile)] = found
        return found


def make_client(options: dict[str, Any]) -> Any:
    """A boto3 S3 client for ``options`` (credentials from the standard chain)."""
    from botocore.config import Config

    session = _session(options.get("profile"))
    config = Config(
        region_name=options.get("region"),
        max_pool_connections=int(options.get("workers", DEFAULT_WORKERS)) + 8,
        retries={
            "mode": "standard",
            "max_attempts": _number(options.get("max_attempts", 5), "max_attempts", int),
        },
        connect_timeout=_number(options.get("connect_timeout", 5), "connect_timeout"),
        read_timeout=_number(options.get("read_timeout", 30), "read_timeout"),
        s3={"addressing_style": options.get("addressing_style", "path")},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    with _sessions_lock:  # a boto3 session is not thread-safe; its clients are
        client = session.client("s3", endpoint_url=options.get("endpoint_url"), config=config)
    # after botocore's own handler, which listens on the whole service
    client.meta.events.register_last("before-call.s3", _send_small_bodies_at_once)
    return client


EXPECT_CONTINUE_FROM = 1 << 20
"""Bodies from this size are announced with ``Expect: 100-continue`` (as botocore does for
every PUT), so a refused request does not send them; smaller ones go with their headers."""


def _send_small_bodies_at_once(model: Any, params: dict[str, Any], **_: Any) -> None:
    """botocore asks for ``100 Continue`` before every PUT body: one more round trip per
    write (measured 10 ms more per PUT behind a 10 ms relay, 39 ms for an append of two
    requests instead of 27). Headers, records and message objects are small; only large
    bodies (state blobs) keep the handshake."""
    from botocore.utils import determine_content_length

    headers = params.get("headers", {})
    if model.name != "PutObject" or headers.get("Expect") is None:
        return
    size = determine_content_length(params.get("body"))
    if size is not None and size < EXPECT_CONTINUE_FROM:
        del headers["Expect"]


class S3Stores(Stores):
    """``s3://bucket/prefix?...`` (see the module docstring for options). ``clock`` (a
    callable returning an aware datetime) replaces the server clock, for tests; ``stats``
    (a :class:`RequestStats`) counts requests; ``client`` hands in a boto3 client."""

    backend = BACKEND.name
    capabilities = BACKEND.capabilities
    transcript_thresholds = (WINDOW,)
    root_class: type[Root] = Root
    """The root every store of the bundle shares (the tests plant known flaws in one)."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], datetime] | None = None,
        stats: RequestStats | None = None,
        client: Any = None,
        **options: Any,
    ) -> None:
        bucket, prefix, merged = parse_url(url, options)
        ttl = tombstone_ttl(merged.get("tombstone_ttl"))  # the kit's rule: at most 100 years
        workers = _number(merged.get("workers", DEFAULT_WORKERS), "workers", int)
        merged["workers"] = workers
        if merged.get("addressing_style", "path") not in ("auto", "path", "virtual"):
            raise UsageError("s3 option addressing_style must be auto, path or virtual")
        self.bucket, self.prefix = bucket, prefix
        self.options = merged
        self.stats = stats
        self._client = client
        self.io = S3IO(
            client,
            bucket,
            prefix,
            stats,
            endpoint=str(merged.get("endpoint_url", "")),
            reconnect_window=_seconds(
                merged.get("reconnect_window", DEFAULT_RECONNECT_WINDOW), "reconnect_window"
            ),
            quoted_if_match=flag_option(merged.get("quoted_if_match", True), "quoted_if_match"),
        )
        self.root = self.root_class(
            self.io,
            clock=clock,
            tombstone_ttl=ttl,
            conditional_delete=flag_option(
                merged.get("conditional_delete", True), "conditional_delete"
            ),
        )
        self.runner = Runner(
            workers,
            stats,
            flag_option(merged.get("concurrent_requests", True), "concurrent_requests"),
        )
        self.supervision = S3SupervisionStore(self.root, self.runner)
        self.recording = S3RecordingStore(self.root, self.runner)
        self.state = S3AgentStateStore(self.root, self.runner)
        self.conversations = S3ConversationStore(self.root, self.runner)
        self.pause_tokens = S3PauseTokenStore(self.root, self.runner)
        self.oauth = S3OAuthStore(self.root, self.runner)

    def __repr__(self) -> str:
        return f"S3Stores(bucket={self.bucket!r}, prefix={self.prefix!r})"

    async def now(self) -> datetime:
        """The store clock: the server's ``Date`` (``clock=`` when given)."""
        return from_micros(await self.runner(self.root.now_us))

    async def _open(self) -> None:
        try:
            if self.io.client is None:
                self.io.client = await self.runner(make_client, self.options)
            await self.runner(self.io.head_bucket)
        except Exception as exc:
            translated = translate(exc)
            if translated is None:
                raise
            raise BackendUnavailableError(
                f"cannot open s3://{self.bucket}/{self.prefix}: {translated}"
            ) from exc

    async def _close(self) -> None:
        await self.runner.stop()
        client, self.io.client = self.io.client, self._client
        if client is not None and client is not self._client:
            client.close()


__all__ = ["URL_OPTIONS", "S3Stores", "parse_url"]
