"""A real S3 server for the S3 backend: Ceph's RADOS gateway (tests/servers/ceph.py),
one per session, with a bucket of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers.ceph import CephGateway
from tests.servers.moto import use_test_credentials

BUCKET = "agentstores-test"

use_test_credentials()  # the gateway's user has moto's dummy keys


@pytest.fixture(scope="session")
def gateway() -> Iterator[CephGateway]:
    from tests.s3.conftest import make_bucket

    with CephGateway() as server:
        make_bucket(server.url(BUCKET))
        yield server
