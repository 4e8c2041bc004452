"""Sentinel URLs: where the Sentinels are and which primary they watch.

redis-py follows a Sentinel-managed primary (``redis.asyncio.sentinel``) but has no URL
form for it. The adapter takes the form other libraries converged on (the
``redis-sentinel-url`` package, Prefect, Docket, RedisVL)::

    redis+sentinel://[user:pass@]host[:port][,host2[:port2],...]/service_name[/db][?options]

- the hosts are the Sentinels (port 26379 when left out), at least one;
- ``service_name`` is the name the Sentinels monitor the primary under
  (``sentinel monitor <service_name> ...``); ``db`` the database number (default 0);
- the user and password are the data nodes' (primary and replicas), as in a ``redis://``
  URL; the Sentinels' own, when they need one, are the ``sentinel_username`` and
  ``sentinel_password`` query options;
- ``valkey+sentinel://`` is the same. TLS (``rediss+sentinel://``) is refused for now: no
  test here runs TLS Sentinels.

Parsing only: nothing here connects. Every mistake is a :class:`UsageError` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode

from agentstores.errors import UsageError
from agentstores.urls import redact_url

SENTINEL_SCHEMES = {"redis+sentinel": "redis", "valkey+sentinel": "redis"}
"""Sentinel schemes, and the scheme of the data nodes' connections they stand for."""
TLS_SENTINEL_SCHEMES = ("rediss+sentinel", "valkeys+sentinel")
"""Spelled as users will try them; refused with the reason (:func:`parse_sentinel_url`)."""
DEFAULT_SENTINEL_PORT = 26379
SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
"""Query options for the Sentinels' own credentials (taken out of the data nodes' URL)."""
FORM = "redis+sentinel://[user:pass@]host[:port][,host2[:port2],...]/service_name[/db]"


@dataclass(frozen=True)
class SentinelTarget:
    """A parsed Sentinel URL."""

    sentinels: tuple[tuple[str, int], ...]
    """The Sentinels' ``(host, port)``, in the URL's order."""
    service_name: str
    node_url: str
    """A ``redis://`` URL with the data nodes' credentials, database and driver options
    and a placeholder host (the primary's address comes from the Sentinels), for
    redis-py's own URL parser."""
    sentinel_username: str | None = None
    sentinel_password: str | None = None


def is_sentinel_url(url: str) -> bool:
    """Whether ``url`` has a Sentinel scheme (TLS ones included, to refuse them clearly)."""
    scheme = url.partition("://")[0].lower()
    return scheme in SENTINEL_SCHEMES or scheme in TLS_SENTINEL_SCHEMES


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The Sentinels, service name and data nodes' settings of ``url`` (see the module).

    Raises:
        UsageError: not a Sentinel URL, a TLS one, no Sentinel, a bad host or port, no
            service name, a bad database number, or ``db`` given in the query.
    """
    shown = redact_url(url)
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme in TLS_SENTINEL_SCHEMES:
        raise UsageError(
            f"{scheme}:// (Sentinel over TLS) is not supported yet: {shown!r}; use "
            "redis+sentinel:// on a trusted network, or rediss:// to a fixed primary"
        )
    if not sep or scheme not in SENTINEL_SCHEMES:
        raise UsageError(f"not a Sentinel URL: {shown!r} (form: {FORM})")
    # split by hand: urlsplit refuses a host list holding a bracketed IPv6 address
    rest, _, _fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    sentinels = tuple(_sentinel(host, shown) for host in hosts.split(","))
    segments = path.split("/") if path else []
    if not segments or not segments[0]:
        raise UsageError(f"the Sentinel URL names no service: {shown!r} (form: {FORM})")
    if len(segments) > 2:
        raise UsageError(
            f"the Sentinel URL's path has more than a service name and a database: "
            f"{shown!r} (form: {FORM})"
        )
    service = unquote(segments[0])
    db = segments[1] if len(segments) == 2 else "0"
    if not db.isdigit() or not db.isascii():
        raise UsageError(f"the Sentinel URL's database must be a number, not {db!r}: {shown!r}")
    options: dict[str, str | None] = dict.fromkeys(SENTINEL_OPTIONS)
    rest_query = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "db":
            raise UsageError(
                f"a Sentinel URL gives the database in its path (/{service}/<db>), "
                f"not as ?db=: {shown!r}"
            )
        if name in options:
            options[name] = value
        else:
            rest_query.append((name, value))
    node_url = f"redis://{userinfo}{at}primary/{int(db)}"
    if rest_query:
        node_url += f"?{urlencode(rest_query)}"
    return SentinelTarget(
        sentinels=sentinels,
        service_name=service,
        node_url=node_url,
        sentinel_username=options["sentinel_username"],
        sentinel_password=options["sentinel_password"],
    )


def _sentinel(spelled: str, shown: str) -> tuple[str, int]:
    """One ``host[:port]`` (``[v6]:port`` too) of the Sentinel list."""
    if spelled.startswith("["):
        host, bracket, after = spelled[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise UsageError(f"bad Sentinel address {spelled!r} in {shown!r}")
        port = after[1:] if after else ""
    elif spelled.count(":") > 1:
        raise UsageError(f"an IPv6 Sentinel address needs brackets ([::1]:26379): {shown!r}")
    else:
        host, _, port = spelled.partition(":")
    if not host or any(c in host for c in " /?#@"):
        raise UsageError(f"a Sentinel address has no host: {spelled!r} in {shown!r} (form: {FORM})")
    if not port:
        return host, DEFAULT_SENTINEL_PORT
    if not (port.isdigit() and port.isascii() and 0 < int(port) < 65536):
        raise UsageError(f"bad Sentinel port {port!r} in {shown!r}")
    return host, int(port)


__all__ = [
    "DEFAULT_SENTINEL_PORT",
    "SENTINEL_OPTIONS",
    "SENTINEL_SCHEMES",
    "TLS_SENTINEL_SCHEMES",
    "SentinelTarget",
    "is_sentinel_url",
    "parse_sentinel_url",
]
