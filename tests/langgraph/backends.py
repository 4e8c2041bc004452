"""The backends the LangGraph tests run on, by name: each opens a fresh, empty store.

One entry per backend in :data:`BACKENDS`; a new backend (MongoDB) is one more entry
here and one line in ``_url``. PostgreSQL and Redis are the servers named by
``$AGENTSTORES_TEST_POSTGRES_URL`` and ``$AGENTSTORES_TEST_REDIS_URL``: when either is
unset the tests that need it fail (they do not skip). S3 is moto in server mode.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from agentstores import Stores, open_stores

BACKENDS = ("memory", "file", "postgres", "redis", "s3")
POSTGRES_ENV = "AGENTSTORES_TEST_POSTGRES_URL"
REDIS_ENV = "AGENTSTORES_TEST_REDIS_URL"


def required_env(name: str) -> str:
    url = os.environ.get(name)
    if not url:
        raise RuntimeError(f"{name} must name a server for these tests (they never skip)")
    return url


class Servers:
    """Per-session server state: a PostgreSQL schema, a Redis key prefix, a moto server
    and a scratch directory, each made on first use and cleaned up at the end."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self._stack = contextlib.ExitStack()
        self._pg_url: str | None = None
        self._redis_url: str | None = None
        self._s3_base: str | None = None
        self.redis_prefixes: list[str] = []

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def pg_admin(self) -> str:
        return required_env(POSTGRES_ENV)

    def pg_url(self) -> str:
        if self._pg_url is None:
            from tests.servers.postgres import Installation

            installation = self._stack.enter_context(Installation(self.pg_admin, prefix="aslg"))
            self._pg_url = installation.url
        return self._pg_url

    def redis_url(self) -> str:
        if self._redis_url is None:
            base = required_env(REDIS_ENV)
            prefix = f"aslg-{uuid.uuid4().hex[:10]}"
            self._redis_url = f"{base}{'&' if '?' in base else '?'}key_prefix={prefix}"
            self._stack.callback(_purge_redis, self._redis_url)
        return self._redis_url

    def s3_url(self) -> str:
        if self._s3_base is None:
            from tests.s3.conftest import BUCKET, make_bucket, with_prefix
            from tests.servers.moto import MotoServer, use_test_credentials

            use_test_credentials()
            server = self._stack.enter_context(MotoServer())
            make_bucket(server.url(BUCKET))
            self._s3_base = with_prefix(server.url(BUCKET))
        return self._s3_base

    def url(self, backend: str) -> str:
        """A URL on ``backend``; tests keep apart by tenant (every saver gets its own)."""
        if backend == "memory":
            return f"memory://lg-{uuid.uuid4().hex[:8]}"
        if backend == "file":
            return f"file://{self.scratch / 'file-store'}"
        if backend == "postgres":
            return self.pg_url()
        if backend == "redis":
            return self.redis_url()
        if backend == "s3":
            return self.s3_url()
        raise ValueError(f"unknown backend {backend!r}")

    @contextlib.asynccontextmanager
    async def open(self, backend: str) -> AsyncIterator[Stores]:
        async with open_stores(self.url(backend)) as stores:
            yield stores


def _purge_redis(url: str) -> None:
    from tests.redis.conftest import purge

    purge(url)


def fresh_tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def servers(scratch: Path) -> Iterator[Servers]:
    with Servers(scratch) as s:
        yield s
