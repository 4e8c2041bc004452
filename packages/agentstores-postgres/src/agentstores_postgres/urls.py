"""The backend URL: a libpq-style ``postgresql://`` URL plus agentstores' own options.

Our options ride in the query string and are removed before the URL reaches asyncpg
(which would send unknown ones to the server as settings)::

    postgresql://app@db:5432/chat?schema=agentstores&pool_max_size=20&pgbouncer=true

Every option can also be passed as a keyword to ``PostgresStores``; keywords win. The
other query parameters allowed are asyncpg's connection parameters (``sslmode``, ...),
``application_name`` and ``options``; any other name is refused before connecting.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from agentstores.errors import UsageError
from agentstores.stores.kit import DEFAULT_TOMBSTONE_TTL, tombstone_ttl, url_options
from agentstores.urls import redact_url

DEFAULT_SCHEMA = "agentstores"
SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True, slots=True, repr=False)
class Config:
    """Everything the adapter needs to connect, parsed and checked once.

    Its ``repr`` shows the DSN through :func:`~agentstores.urls.redact_url`: the DSN
    carries the password, and a config ends up in logs and tracebacks.
    """

    dsn: str
    schema: str = DEFAULT_SCHEMA
    pool_min_size: int = 1
    pool_max_size: int = 10
    acquire_timeout: float = 10.0
    """Seconds a call waits for a free pooled connection before BackendUnavailableError."""
    reconcile_timeout: float = 15.0
    """Seconds spent learning the outcome of a write whose connection was lost."""
    pgbouncer: bool = False
    """Transaction pooling: no prepared-statement cache, no session state."""
    tombstone_ttl: timedelta = DEFAULT_TOMBSTONE_TTL
    command_timeout: float | None = 30.0
    """Seconds one statement may wait for its answer (asyncpg, client-side): a server
    that stops answering without closing the connection (a blackholed network) ends the
    call as an unknown outcome instead of holding it forever."""
    push: bool = True
    """Wake other processes' followers: a listening connection per bundle subscribes to
    the keys its followers watch, and a write to such a key publishes a notification (a
    write nobody follows publishes nothing: see the README's figures). Off behind
    pgbouncer (it cannot ``LISTEN``)."""

    @property
    def pushing(self) -> bool:
        """Whether this bundle publishes and listens: ``push`` and not behind pgbouncer."""
        return self.push and not self.pgbouncer

    def __repr__(self) -> str:
        shown = (
            f"{f.name}={redact_url(self.dsn) if f.name == 'dsn' else getattr(self, f.name)!r}"
            for f in fields(self)
        )
        return f"Config({', '.join(shown)})"


_OPTIONS = {
    "schema": str,
    "pool_min_size": int,
    "pool_max_size": int,
    "acquire_timeout": float,
    "reconcile_timeout": float,
    "pgbouncer": bool,
    "tombstone_ttl": float,
    "command_timeout": float,
    "push": bool,
}

DRIVER_OPTIONS = frozenset(
    {
        # the libpq connection parameters asyncpg reads from a URL
        "host",
        "port",
        "dbname",
        "database",
        "user",
        "password",
        "passfile",
        "service",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslnegotiation",
        "sslcrl",
        "sslpassword",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
        # sent to the server at startup, which always accepts them
        "application_name",
        "options",
    }
)
"""Query parameters handed on to asyncpg. Any other name would reach the server as a
setting and fail only when connecting, so it is refused when the URL is parsed."""
_SETTINGS_HINT = " (a server setting goes in options=-c name=value)"


def _coerce(name: str, value: Any) -> Any:
    if name == "tombstone_ttl":
        return tombstone_ttl(value)  # the kit's rule: positive, at most 100 years
    kind = _OPTIONS[name]
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off", ""}:
                return False
            raise ValueError(value)
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"option {name}={value!r} is not a valid {kind.__name__}") from exc


def parse_url(url: str, **options: Any) -> Config:
    """Split ``url`` into the asyncpg DSN and our options (keywords override the URL)."""
    if not isinstance(url, str):
        raise UsageError(f"expected a postgresql:// URL, got {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise UsageError(f"not a postgresql:// or postgres:// URL: {redact_url(url)!r}")
    ours: dict[str, Any] = {}
    theirs: list[tuple[str, str]] = []
    known = {*_OPTIONS, *DRIVER_OPTIONS}
    for name, value in url_options(url, known, backend="PostgreSQL", hint=_SETTINGS_HINT):
        if name in _OPTIONS:
            ours[name] = value
        else:
            theirs.append((name, value))
    for name, value in options.items():
        if name not in _OPTIONS:
            raise UsageError(
                f"unknown PostgreSQL backend option {name!r}; known: {sorted(_OPTIONS)}"
            )
        if value is not None:
            ours[name] = value
    values = {name: _coerce(name, value) for name, value in ours.items()}
    dsn = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(theirs), ""))
    config = Config(dsn=dsn, **values)
    if config.pool_min_size < 0 or config.pool_max_size < 1:
        raise UsageError("pool_max_size must be >= 1 and pool_min_size >= 0")
    if config.pool_min_size > config.pool_max_size:
        raise UsageError("pool_min_size cannot exceed pool_max_size")
    if config.acquire_timeout <= 0 or config.reconcile_timeout <= 0:
        raise UsageError("acquire_timeout and reconcile_timeout must be positive")
    return config
