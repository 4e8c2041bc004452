"""Servers for the S3 backend's tests: moto in server mode, served single-threaded (each
request atomic) for the correctness runs, and any real endpoint named by
``AGENTSTORES_TEST_S3_URL`` (AWS, R2, MinIO: ``s3://bucket/prefix?region=...``).

Every URL carries a fresh random prefix, so runs sharing a bucket never collide; at the
end only objects under that prefix are deleted.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.servers.moto import MotoServer, use_test_credentials
from tests.servers.shared import shared_url
from tests.servers.variants import not_run

SHARED = shared_url()
"""A mutation run's moto (an ``s3://`` URL naming its endpoint), standing in for this
session's: see :mod:`tests.servers.shared`."""

S3_URL_ENV = "AGENTSTORES_TEST_S3_URL"
BUCKET = "agentstores-test"

use_test_credentials()


def with_prefix(url: str, prefix: str | None = None) -> str:
    """``url`` with a fresh random path segment appended to its prefix."""
    prefix = prefix or f"astest-{uuid.uuid4().hex[:10]}"
    base, _, query = url.partition("?")
    base = base.rstrip("/")
    if base.count("/") == 2:  # s3://bucket
        base += "/"
    else:
        base += "/"
    return f"{base}{prefix}" + (f"?{query}" if query else "")


def client_for(url: str):  # type: ignore[no-untyped-def]
    from agentstores_s3.stores import make_client, parse_url

    _, _, options = parse_url(url, {})
    return make_client(options)


def make_bucket(url: str) -> None:
    from agentstores_s3.stores import parse_url

    bucket, _, _ = parse_url(url, {})
    client = client_for(url)
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    finally:
        client.close()


def purge(url: str) -> None:
    """Delete the objects under ``url``'s prefix."""
    from agentstores_s3.stores import parse_url

    bucket, prefix, _ = parse_url(url, {})
    client = client_for(url)
    try:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", ())]
            if keys:
                client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    finally:
        client.close()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    if SHARED:  # a handle on the run's server: never started or stopped here
        endpoint = parse_qs(urlsplit(SHARED).query)["endpoint_url"][0]
        server = MotoServer(port=urlsplit(endpoint).port)
        make_bucket(server.url(BUCKET))
        yield server
        return
    with MotoServer() as server:
        make_bucket(server.url(BUCKET))
        yield server


REAL_S3 = None if SHARED else os.environ.get(S3_URL_ENV)
"""A real S3 endpoint (AWS, R2, MinIO), where the env URL names one; Ceph's RADOS gateway
has a session of its own (tests-s3-ceph)."""
if not REAL_S3:
    not_run("an external S3 endpoint", f"${S3_URL_ENV} does not name one")


@pytest.fixture(scope="session")
def real_s3_base() -> str:
    assert REAL_S3, "only requested by tests collected when the env URL is set"
    return REAL_S3


@pytest.fixture
def url(moto_server: MotoServer) -> Iterator[str]:
    """A fresh-prefixed URL on the single-threaded moto server, purged after the test."""
    prefixed = with_prefix(moto_server.url(BUCKET))
    yield prefixed
    purge(prefixed)
