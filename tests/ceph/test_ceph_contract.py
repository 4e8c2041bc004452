"""The whole contract suite against Ceph's RADOS gateway, a real S3 server (with the
options RGW 16 needs: ``quoted_if_match=false``, ``conditional_delete=false``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from tests.s3.conftest import purge, with_prefix
from tests.servers.ceph import CephGateway

from .conftest import BUCKET


class TestCephGateway(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, gateway: CephGateway) -> Iterator[BackendUnderTest]:
        url = with_prefix(gateway.url(BUCKET))
        yield BackendUnderTest.from_url(url)
        purge(url)


class TestCephGatewayConcurrentRequests(ContractSuite):
    """The same with ``concurrent_requests=true``: an append's id checks and copy-out and
    a read's message GET sent with the header's read, on a server that serves them at
    once."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, gateway: CephGateway) -> Iterator[BackendUnderTest]:
        url = with_prefix(gateway.url(BUCKET)) + "&concurrent_requests=true"
        yield BackendUnderTest.from_url(url)
        purge(url)
