"""A networked adapter's mutation run's test command: the whole contract suite against the
server the run started once, outside the tool (``tests/mutation/serve.py``, its URL in
``$AGENTSTORES_MUTATION_URL``), in a fresh namespace per test.

Copied into the adapter's workspace (``.mutation-<adapter>/``) as
``tests/test_contract.py`` beside the server helpers (``tests/servers``) and the adapter's
own tests, so the tests import the mutated adapter that the mutation tool puts first on
``sys.path``; core and the contract suite are the installed, unmutated packages. A
namespace is what the adapter's own contract tests use: a PostgreSQL schema and runtime
role installed by the adapter's installer, a Redis key prefix, a MongoDB collection
prefix with its indexes installed, an S3 key prefix. Each is removed after its test with
the raw driver, not through the code under mutation.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from agentstores_contract.lifetimes import _real_time_verdicts, exact
from tests.servers.shared import SHARED_URL_ENV

URL_ENV = SHARED_URL_ENV
BASE = os.environ.get(URL_ENV, "")
if not BASE:  # a collection error, not a skip: the run proves nothing without a server
    raise RuntimeError(f"${URL_ENV} names no server: run through tests/mutation/serve.py")
SCHEME = BASE.split("://", 1)[0]
PACKAGE = {
    "postgresql": "agentstores_postgres",
    "redis": "agentstores_redis",
    "mongodb": "agentstores_mongo",
    "s3": "agentstores_s3",
}[SCHEME]
MUTATED = __import__(PACKAGE)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [
        str(Path(MUTATED.__file__).resolve().parents[1]),
        *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)),
    ]
)
"""The multi-process tests' workers start as ``python -m`` and find the mutated copy
through PYTHONPATH, so they run the mutant too."""


def test_the_mutated_copy_is_under_test() -> None:
    """A run against the installed package would report every mutant as surviving."""
    assert "mutants" in Path(MUTATED.__file__).parts, MUTATED.__file__


def _tag() -> str:
    return f"mut{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def _postgres() -> Iterator[str]:
    from tests.servers.postgres import Installation

    with Installation(BASE, prefix="mut") as installation:
        yield installation.url


@contextlib.contextmanager
def _redis() -> Iterator[str]:
    import redis

    prefix = _tag()
    yield f"{BASE}{'&' if '?' in BASE else '?'}key_prefix={prefix}"
    client = redis.Redis.from_url(BASE)
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.unlink(key)
    finally:
        client.close()


@contextlib.contextmanager
def _mongo() -> Iterator[str]:
    from tests.servers.mongo import Installation

    with Installation(BASE) as installation:
        yield installation.url


@contextlib.contextmanager
def _s3() -> Iterator[str]:
    import boto3

    parts = urlsplit(BASE)
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    prefix = _tag()
    yield f"s3://{parts.netloc}/{prefix}?{parts.query}"
    client = boto3.client(
        "s3", endpoint_url=query["endpoint_url"], region_name=query.get("region", "us-east-1")
    )
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=parts.netloc, Prefix=prefix)
        for page in pages:
            keys = [{"Key": item["Key"]} for item in page.get("Contents", ())]
            if keys:
                client.delete_objects(Bucket=parts.netloc, Delete={"Objects": keys})
    finally:
        client.close()


NAMESPACES = {"postgresql": _postgres, "redis": _redis, "mongodb": _mongo, "s3": _s3}


class TestAdapterUnderMutation(ContractSuite):
    """A fresh namespace per test: the mutation tool maps each function to the tests that
    call it, and a class-wide store would credit its construction to the first test."""

    @pytest.fixture
    def backend(self) -> Iterator[BackendUnderTest]:
        with NAMESPACES[SCHEME]() as url:
            yield BackendUnderTest.from_url(url)

    @pytest.fixture
    def real_time_problems(self, backend: BackendUnderTest) -> dict[str, list[str]] | None:
        """Function-scoped like ``backend``: the real-time checks (none on a settable
        clock), run in each lifetime test."""
        return None if exact(backend) else asyncio.run(_real_time_verdicts(backend))
