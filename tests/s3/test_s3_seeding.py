"""The bench's seeding path (tests/bench/s3_lengths.py: the adapter's own appends run in
the moto process, each request handed to moto's S3 backend without a socket) writes the
objects the same appends write over HTTP: the same names and the same bodies, once the
values that differ on every run (writer nonces, run ids, store-clock stamps) are set
aside. So the bench's 100,000-message transcript is the one real appends would leave."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from agentstores_s3.stores import parse_url
from tests.bench.s3_lengths import BackendClient, moto_backend, seed

from .conftest import client_for

LENGTHS = (160,)
SHORTS = 2
BATCH = 40
VARYING = {"w", "life", "t", "c", "u", "last", "gen"}
"""Fields set from nonces and the store clock (``t`` is a message's stamp or a title,
None here either way)."""


def _normal(name: str, body: bytes) -> tuple[str, Any]:
    """An object with its run ids and varying fields set aside."""
    name = re.sub(r"/(m|i)/[0-9a-f]+/", r"/\1/RUN/", name)
    try:
        value = json.loads(body)
    except ValueError:
        return name, body
    return name, _strip(value)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        if len(value) == 3 and isinstance(value[0], str) and isinstance(value[1], int):
            return ["RUN", *value[1:]]  # a run of the transcript: [gen, start, end]
        return [_strip(v) for v in value]
    return value


def _over_http(url: str) -> dict[str, Any]:
    bucket, prefix, _ = parse_url(url, {})
    client = client_for(url)
    try:
        found: dict[str, Any] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", ()):
                body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                name, value = _normal(item["Key"][len(prefix) :], body)
                found[name] = value
        return found
    finally:
        client.close()


def _in_backend(backend: Any, bucket: str, prefix: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in list(backend.get_bucket(bucket).keys):
        if key.startswith(prefix):
            name, value = _normal(key[len(prefix) :], backend.get_object(bucket, key).value)
            found[name] = value
    return found


@pytest.mark.timeout(300)
def test_the_bench_seeding_writes_what_appends_over_http_write(url: str) -> None:
    asyncio.run(seed(None, url, LENGTHS, SHORTS, batch_size=BATCH))
    over_http = _over_http(url)

    backend = moto_backend()
    bucket = "agentstores-seeding-check"
    backend.create_bucket(bucket, "us-east-1")
    try:
        direct = f"s3://{bucket}/seeded?region=us-east-1"
        asyncio.run(seed(BackendClient(backend), direct, LENGTHS, SHORTS, batch_size=BATCH))
        in_backend = _in_backend(backend, bucket, "seeded/")
    finally:
        for key in list(backend.get_bucket(bucket).keys):
            backend.delete_object(bucket, key)
        backend.delete_bucket(bucket)

    messages = [n for n in over_http if "/m/" in n]
    assert len(messages) == LENGTHS[0] - 32, len(messages)  # all but the header's window
    assert sorted(in_backend) == sorted(over_http)
    assert in_backend == over_http
