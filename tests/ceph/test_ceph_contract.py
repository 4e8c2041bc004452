"""The whole contract suite against Ceph's RADOS gateway, a real S3 server (with the
options RGW 16 needs: ``quoted_if_match=false``, ``conditional_delete=false``), with
``concurrent_requests`` (the default) and without."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from tests.s3.test_s3_contract import fresh_backend
from tests.servers.ceph import CephGateway

from .conftest import BUCKET


class TestCephGateway(ContractSuite):
    options = ""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, gateway: CephGateway) -> Iterator[BackendUnderTest]:
        yield from fresh_backend(gateway.url(BUCKET), cls.options)


class TestCephGatewayOneRequestAtATime(TestCephGateway):
    options = "&concurrent_requests=false"
