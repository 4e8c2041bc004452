"""A private server per networked backend, and the store URL that reaches it through a
fault proxy, with the client timeouts the run uses.

    with served("redis") as target:
        proxy = await NetFaultProxy("127.0.0.1", target.port).start()
        url = target.through(proxy.port)      # clients go through the proxy
        target.direct                         # the checker reads around it

Every reply timeout is :data:`REPLY_TIMEOUT` seconds, so a blackholed call ends in
seconds; the adapters' defaults are listed in :data:`DEFAULT_TIMEOUTS`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

BACKENDS = ("postgres", "redis", "mongo", "s3")
REPLY_TIMEOUT = 2.0
"""Seconds a client waits for a reply in these runs (each adapter's own option)."""
DEFAULT_TIMEOUTS = {
    "postgres": "command_timeout 30 s",
    "redis": "socket_timeout 10 s",
    "mongo": "socketTimeoutMS 20 s",
    "s3": "read_timeout 30 s",
}
"""Each adapter's reply timeout when the URL names none (its docstring's defaults)."""
_TIMEOUT_OPTIONS = {
    "postgres": f"command_timeout={REPLY_TIMEOUT:g}",
    "redis": f"socket_timeout={REPLY_TIMEOUT:g}",
    "mongo": f"socketTimeoutMS={int(REPLY_TIMEOUT * 1000)}",
    "s3": f"read_timeout={REPLY_TIMEOUT:g}&connect_timeout={REPLY_TIMEOUT:g}",
}


@dataclass(frozen=True)
class Target:
    """A store on a private server: ``direct`` reaches it, :meth:`through` via a proxy."""

    backend: str
    direct: str
    port: int

    def through(self, proxy_port: int, *, timeouts: bool = True, options: str = "") -> str:
        """The store URL with its host and port replaced by the proxy's; with the run's
        reply timeout unless ``timeouts`` is false (the adapter's defaults then), and
        ``options`` (``name=value&...``) added."""
        parts = urlsplit(self.direct)
        if self.backend == "s3":
            query = parts.query.replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{proxy_port}")
            url = urlunsplit(parts._replace(query=query))
        else:
            netloc = parts.netloc.replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{proxy_port}")
            assert netloc != parts.netloc, f"no 127.0.0.1:{self.port} in the URL"
            url = urlunsplit(parts._replace(netloc=netloc))
        timeout = _TIMEOUT_OPTIONS[self.backend] if timeouts else ""
        extra = "&".join(o for o in (timeout, options) if o)
        return f"{url}{'&' if '?' in url else '?'}{extra}" if extra else url


@contextlib.contextmanager
def served(backend: str) -> Iterator[Target]:
    """A fresh private server for ``backend`` with an empty, installed store on it."""
    if backend == "postgres":
        from tests.servers.postgres import EmbeddedPostgres, Installation

        with EmbeddedPostgres() as pg, Installation(pg.url, prefix="nf") as inst:
            yield Target(backend, inst.url, urlsplit(pg.url).port or 0)
    elif backend == "redis":
        from tests.servers.valkey import ValkeyServer

        with ValkeyServer() as server:
            yield Target(backend, f"{server.url}?key_prefix=nf", server.port)
    elif backend == "mongo":
        from tests.servers.mongo import Installation as MongoInstallation
        from tests.servers.mongo import NxServer

        with NxServer() as nx, MongoInstallation(nx.url) as mongo:
            yield Target(backend, mongo.url, nx.port)
    elif backend == "s3":
        from tests.s3.conftest import BUCKET, make_bucket
        from tests.servers.moto import MotoServer, use_test_credentials

        use_test_credentials()
        with MotoServer() as moto:
            make_bucket(moto.url(BUCKET))
            yield Target(backend, moto.url(BUCKET, f"nf-{uuid.uuid4().hex[:8]}"), moto.port)
    else:
        raise ValueError(f"unknown backend {backend!r}; one of {BACKENDS}")


__all__ = ["BACKENDS", "DEFAULT_TIMEOUTS", "REPLY_TIMEOUT", "Target", "served"]
