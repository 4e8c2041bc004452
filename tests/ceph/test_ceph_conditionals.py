"""What RGW 16 does with conditional requests, straight through boto3: why the S3
backend is given ``quoted_if_match=false`` and ``conditional_delete=false`` there. If a
later Ceph changes either, these fail and say which option it no longer needs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.s3.conftest import client_for
from tests.servers.ceph import CephGateway

from .conftest import BUCKET


@pytest.fixture
def s3(gateway: CephGateway) -> Iterator[Any]:
    client = client_for(gateway.url(BUCKET))
    yield client
    client.close()


def status(call: Any, **kwargs: Any) -> int:
    try:
        return int(call(**kwargs)["ResponseMetadata"]["HTTPStatusCode"])
    except ClientError as exc:
        return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])


def test_create_only_if_absent_holds(s3: Any) -> None:
    args = {"Bucket": BUCKET, "Key": "conditionals/create", "IfNoneMatch": "*"}
    assert status(s3.put_object, Body=b"1", **args) == 200
    assert status(s3.put_object, Body=b"2", **args) == 412


def test_if_match_is_compared_with_the_bare_etag(s3: Any) -> None:
    key = {"Bucket": BUCKET, "Key": "conditionals/if-match"}
    etag = s3.put_object(Body=b"1", **key)["ETag"]
    assert etag.startswith('"'), etag
    assert status(s3.put_object, Body=b"2", IfMatch=etag, **key) == 412, (
        "RGW now takes the quoted ETag: quoted_if_match=false is no longer needed"
    )
    assert status(s3.put_object, Body=b"2", IfMatch=etag.strip('"'), **key) == 200
    # the condition itself holds in the bare form: the old ETag is now stale
    assert status(s3.put_object, Body=b"3", IfMatch=etag.strip('"'), **key) == 412


def test_delete_ignores_if_match(s3: Any) -> None:
    key = {"Bucket": BUCKET, "Key": "conditionals/delete"}
    s3.put_object(Body=b"1", **key)
    status(s3.delete_object, IfMatch='"0123456789abcdef0123456789abcdef"', **key)
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=key["Key"]).get("KeyCount", 0)
    assert listed == 0, "RGW now honours If-Match on DELETE: conditional_delete can be true"
