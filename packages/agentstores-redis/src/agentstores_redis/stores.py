"""``RedisStores``: every store on one Redis / Valkey deployment: standalone, cluster or Sentinel.

URLs (the scheme picks the topology, the rest is redis-py's URL syntax)::

    redis://[user:password@]host:port[/db]      standalone (valkey:// is the same)
    rediss://...                                standalone over TLS (valkeys:// too)
    redis+cluster://host:port                   a cluster, from any seed node
    rediss+cluster://host:port                  a cluster over TLS (valkey[s]+cluster://)
    redis+sentinel://host:port[,host:port...]/service_name[/db]
                                                the primary Sentinel names (valkey+sentinel://),
                                                followed through failovers (sentinel.py)

Options, as keyword arguments or URL query parameters (``?key_prefix=app1&pool_size=64``):
``key_prefix`` (default ``as``), ``pool_size`` (32 connections), ``pool_timeout`` (5 s to
wait for a free connection before ``BackendUnavailableError``), ``socket_timeout``
(10 s), ``connect_timeout`` (5 s), ``reconnect_window`` (3 s: how long a call keeps
trying to connect while the server is unreachable, e.g. restarting; nothing was sent, so
retrying is safe), ``tombstone_ttl`` (seconds or a timedelta; 30 days; at most 100 years),
``expiry_grace`` (seconds or a timedelta; 1 hour: how long after ``expires_at`` the server
drops a temporary conversation by itself if no sweeper erased it), and, off by default,
``wait_replicas`` / ``wait_aof_local`` / ``wait_aof_replicas`` /
``wait_timeout_ms``: after every write, ``WAIT`` / ``WAITAOF`` on the same connection
before the call returns (see README.md, Durability). ``push`` (default: on for one
server, off for a cluster, see :func:`pushes`): writes publish wake-ups on sharded
pub/sub and each bundle listens for the keys it follows, so followers in other processes
wake at once (see listener.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis.exceptions import NoPermissionError

from agentstores.errors import BackendUnavailableError, UnsupportedError, UsageError
from agentstores.stores import Capability, Stores
from agentstores.stores.kit import DEFAULT_TOMBSTONE_TTL, from_micros, tombstone_ttl, url_options
from agentstores.urls import redact_url

from ._base import Context
from .client import ClientOptions, NotSent, RedisClient, Uncertain
from .conversations import RedisConversationStore
from .errors import translate
from .keys import KeySpace
from .listener import PushListener
from .lua import ALL_SCRIPTS
from .oauth import RedisOAuthStore
from .pause_tokens import RedisPauseTokenStore
from .plugin import BACKEND
from .recording import RedisRecordingStore
from .sentinel import (
    SENTINEL_OPTIONS,
    SENTINEL_SCHEMES,
    TLS_SENTINEL_SCHEMES,
    is_sentinel_url,
    parse_sentinel_url,
)
from .state import RedisAgentStateStore
from .supervision import RedisSupervisionStore

STANDALONE_SCHEMES = {"redis": "redis", "rediss": "rediss", "valkey": "redis", "valkeys": "rediss"}
CLUSTER_SCHEMES = {f"{s}+cluster": t for s, t in STANDALONE_SCHEMES.items()}
SCHEMES = (
    tuple(STANDALONE_SCHEMES)
    + tuple(CLUSTER_SCHEMES)
    + tuple(SENTINEL_SCHEMES)
    + TLS_SENTINEL_SCHEMES
)
"""Every scheme the plugin registers (the TLS Sentinel ones only to refuse them by name)."""

_INT_OPTIONS = (
    "pool_size",
    "wait_replicas",
    "wait_aof_local",
    "wait_aof_replicas",
    "wait_timeout_ms",
)
_FLOAT_OPTIONS = (
    "reconnect_window",
    "pool_timeout",
    "socket_timeout",
    "connect_timeout",
    "expiry_grace",
)
_STR_OPTIONS = ("key_prefix", "client_name")
_BOOL_OPTIONS = ("push",)
OPTIONS = (*_INT_OPTIONS, *_FLOAT_OPTIONS, "tombstone_ttl", *_STR_OPTIONS, *_BOOL_OPTIONS)

_REFUSED = {
    "protocol": "replies are parsed as RESP2",
    "decode_responses": "replies are parsed as bytes",
    "single_connection_client": "calls run concurrently over a pool",
    "max_connections": "use pool_size",
    "timeout": "use pool_timeout",
    "socket_connect_timeout": "use connect_timeout",
    "health_check_interval": "connections are checked by the adapter",
    "retry_on_timeout": "the adapter decides what is safe to send again",
}
DRIVER_OPTIONS = ("db", "username", "password", "socket_keepalive", "socket_read_size")
"""Query parameters handed on to redis-py, which would pass any other name to its
connection class and fail only when connecting: so every other name is refused."""
TLS_OPTIONS = (
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_path",
    "ssl_ca_data",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_password",
    "ssl_check_hostname",
    "ssl_min_version",
    "ssl_ciphers",
    "ssl_include_verify_flags",
    "ssl_exclude_verify_flags",
)
"""redis-py's TLS parameters, taken with ``rediss://`` (and ``valkeys://``) only."""
DEFAULT_EXPIRY_GRACE = timedelta(hours=1)


def parse_url(url: str, options: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
    """``(driver URL, cluster?, options)``: our query parameters are taken out of the
    URL and merged under the keyword options. The driver URL is redis-py's, or for
    Sentinel a ``redis+sentinel://`` URL (:mod:`.sentinel`) the client reads."""
    scheme = url.partition("://")[0].lower()
    sentinel = is_sentinel_url(url)
    if sentinel:
        parse_sentinel_url(url)  # a TLS or malformed Sentinel URL fails first, by name
        cluster, driver_scheme = False, scheme
    elif scheme in STANDALONE_SCHEMES:
        cluster, driver_scheme = False, STANDALONE_SCHEMES[scheme]
    elif scheme in CLUSTER_SCHEMES:
        cluster, driver_scheme = True, CLUSTER_SCHEMES[scheme]
    else:
        raise UsageError(f"not a Redis URL: {redact_url(url)!r} (schemes: {', '.join(SCHEMES)})")
    # the query by hand: urlsplit refuses a Sentinel host list holding an IPv6 address
    before, _, query = url.partition("#")[0].partition("?")
    merged: dict[str, Any] = {}
    rest = []
    tls = driver_scheme == "rediss"
    for name, _ in parse_qsl(query, keep_blank_values=True):
        if name in _REFUSED:
            raise UsageError(f"the redis option {name!r} is fixed by the adapter: {_REFUSED[name]}")
    known = {*OPTIONS, *DRIVER_OPTIONS, *(TLS_OPTIONS if tls else ())}
    known |= set(SENTINEL_OPTIONS) if sentinel else set()
    hint = "" if tls else " (TLS options need rediss://)"
    for name, value in url_options(f"redis://?{query}", known, backend="redis", hint=hint):
        if name in OPTIONS:
            merged[name] = value
        else:
            rest.append((name, value))
    for name, value in options.items():
        if name not in OPTIONS:
            raise UsageError(f"unknown redis option {name!r}; known: {', '.join(sorted(OPTIONS))}")
        merged.setdefault(name, value)
    try:
        for name in _INT_OPTIONS:
            if name in merged:
                merged[name] = int(merged[name])
        for name in _FLOAT_OPTIONS:
            if name in merged and not isinstance(merged[name], timedelta):
                merged[name] = float(merged[name])
        for name in _BOOL_OPTIONS:
            if name in merged:
                merged[name] = _flag(name, merged[name])
    except (TypeError, ValueError) as exc:
        raise UsageError(f"bad redis option value: {exc}") from exc
    if "tombstone_ttl" in merged:  # the kit's rule: positive, at most 100 years
        merged["tombstone_ttl"] = tombstone_ttl(merged["tombstone_ttl"])
    if sentinel:
        driver = f"{driver_scheme}://{before.partition('://')[2]}"
        return driver + (f"?{urlencode(rest)}" if rest else ""), cluster, merged
    parts = urlsplit(url)
    driver = urlunsplit((driver_scheme, parts.netloc, parts.path, urlencode(rest), ""))
    return driver, cluster, merged


class RedisStores(Stores):
    """Every store on Redis or Valkey; see the module docstring for URLs and options."""

    backend = "redis"
    capabilities = BACKEND.capabilities

    def __init__(self, url: str, **options: Any) -> None:
        driver_url, cluster, opts = parse_url(url, options)
        self.url = url
        self.cluster = cluster
        ttl: timedelta = opts.get("tombstone_ttl", DEFAULT_TOMBSTONE_TTL)
        grace = opts.get("expiry_grace", DEFAULT_EXPIRY_GRACE)
        if not isinstance(grace, timedelta):
            grace = timedelta(seconds=float(grace))
        if grace < timedelta(0):
            raise UsageError("expiry_grace must not be negative")
        self.options = ClientOptions(
            pool_size=opts.get("pool_size", 32),
            pool_timeout=opts.get("pool_timeout", 5.0),
            socket_timeout=opts.get("socket_timeout", 10.0) or None,
            connect_timeout=opts.get("connect_timeout", 5.0),
            wait_replicas=opts.get("wait_replicas", 0),
            wait_aof_local=opts.get("wait_aof_local", 0),
            wait_aof_replicas=opts.get("wait_aof_replicas", 0),
            wait_timeout_ms=opts.get("wait_timeout_ms", 1000),
            client_name=opts.get("client_name", "agentstores"),
            reconnect_window=opts.get("reconnect_window", 3.0),
        )
        if self.options.pool_size < 1:
            raise UsageError("pool_size must be at least 1")
        if self.options.wait_aof_local >= 1:
            self.capabilities = self.capabilities | {Capability.DURABLE}
        self.client = RedisClient(
            driver_url, cluster=cluster, options=self.options, scripts=ALL_SCRIPTS
        )
        waits = bool(
            self.options.wait_replicas
            or self.options.wait_aof_local
            or self.options.wait_aof_replicas
        )
        self.push = pushes(cluster, opts)
        """Whether writes publish wake-ups and the bundle listens for them."""
        self.listener: PushListener | None = None
        """The connections hearing other processes' writes while open with push on."""
        self.ctx = Context(
            client=self.client,
            keys=KeySpace(opts.get("key_prefix", "as"), push=self.push),
            tombstone_ttl_ms=int(ttl / timedelta(milliseconds=1)),
            expiry_grace_us=grace // timedelta(microseconds=1),
            waits=waits,
        )
        self.supervision = RedisSupervisionStore(self.ctx)
        self.recording = RedisRecordingStore(self.ctx)
        self.state = RedisAgentStateStore(self.ctx)
        self.conversations = RedisConversationStore(self.ctx)
        self.pause_tokens = RedisPauseTokenStore(self.ctx)
        self.oauth = RedisOAuthStore(self.ctx)

    def __repr__(self) -> str:
        return f"RedisStores({redact_url(self.url)!r})"

    @property
    def keys(self) -> KeySpace:
        return self.ctx.keys

    async def now(self) -> datetime:
        try:
            return from_micros(await self.client.time_us())
        except Exception as exc:
            translated = translate(exc)
            if translated is None:
                raise
            raise translated from exc

    async def _open(self) -> None:
        try:
            await self.client.open()
            await self._check_server()
            if self.push:
                await self._check_push()
                self.listener = PushListener(self.client, self.ctx.keys, self.wakeups)
                await self.listener.open()
        except (NotSent, Uncertain) as exc:
            # Uncertain: a connection lost while opening (loading the scripts); opening
            # writes nothing a caller could be unsure of, so it is plainly unavailable
            await self._close()
            raise BackendUnavailableError(f"cannot open {redact_url(self.url)}: {exc}") from exc
        except BaseException:
            await self._close()
            raise

    async def _check_server(self) -> None:
        (info,) = (await self.client.on_primaries("INFO", "cluster"))[:1]
        if "cluster_enabled:1" in _text(info) and not self.cluster:
            raise UsageError(
                f"{redact_url(self.url)} is a cluster node; use the redis+cluster:// scheme "
                "for clusters"
            )
        if self.options.wait_aof_local or self.options.wait_aof_replicas:
            (found,) = (await self.client.on_primaries("COMMAND", "INFO", "WAITAOF"))[:1]
            if not found or found[0] is None:
                raise UnsupportedError(
                    "this server has no WAITAOF (Redis 7.2+ / Valkey 7.2+); unset wait_aof_*"
                )
        if self.options.wait_aof_local:
            for persistence in await self.client.on_primaries("INFO", "persistence"):
                if "aof_enabled:1" not in _text(persistence):
                    raise UnsupportedError(
                        "wait_aof_local needs appendonly yes on every primary; it is off"
                    )

    async def _check_push(self) -> None:
        """Push needs the right to publish on the adapter's channels: refused at open, not
        by every write (whose reply a refused publish would turn into an error)."""
        channel = f"{self.keys.prefix}:{{open}}:w"
        try:
            await self.client.command(channel, "SPUBLISH", channel, "")
        except NoPermissionError as exc:
            raise UsageError(
                f"push is on but this user may not publish on {self.keys.prefix}:* channels "
                f"(grant &{self.keys.prefix}:* or set push=false): {exc}"
            ) from exc

    async def _close(self) -> None:
        listener, self.listener = self.listener, None
        try:
            if listener is not None:
                await listener.close()
        finally:
            await self.client.close()

    async def repair_indexes(self) -> int:
        """Rebuild listing/sweeper index entries from every conversation's metadata."""
        return await self.conversations.repair_indexes()

    async def purge(self) -> int:
        """Delete every key under this bundle's prefix (tests and teardown; never FLUSHALL).
        Returns the number of keys deleted."""
        deleted = 0
        for name in await self.client.scan(self.keys.pattern):
            deleted += int(await self.client.command(name.decode(), "UNLINK", name))
        return deleted

    conversations: RedisConversationStore


def pushes(cluster: bool, options: dict[str, Any]) -> bool:
    """Whether a bundle pushes: the ``push`` option, else on for one server and off for
    a cluster. On one server a wake-up nobody follows costs the write nothing measurable;
    a cluster forwards every shard message over its bus to the shard's replicas, followed
    or not (README.md, Push)."""
    return bool(options.get("push", not cluster))


def _flag(name: str, value: Any) -> bool:
    """A boolean option: a bool, or ``true``/``false`` (``1``/``0``, ``yes``/``no``,
    ``on``/``off``)."""
    if isinstance(value, bool):
        return value
    spelled = str(value).strip().lower()
    if spelled in {"1", "true", "yes", "on"}:
        return True
    if spelled in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name}={value!r} is not true or false")


def _text(reply: Any) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


__all__ = ["SCHEMES", "RedisStores", "parse_url", "pushes"]
