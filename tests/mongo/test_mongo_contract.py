"""The whole contract suite against nx-27017 and, when ``MONGODB_URI`` is set, a real
MongoDB. The backend declares multi_process and durable, so the multi-process races and
the durability test run; it lacks only ``native_ttl``, ``cluster`` and ``settable_clock``
(the clock is the server's)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from tests.servers.mongo import MONGODB_URI_ENV, Installation, NxServer


class TestNx27017(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, nx_server: NxServer) -> Iterator[BackendUnderTest]:
        with Installation(nx_server.url) as inst:
            yield BackendUnderTest.from_url(inst.url)


if os.environ.get(MONGODB_URI_ENV):

    class TestRealMongoDB(ContractSuite):
        @pytest.fixture(scope="class")
        @classmethod
        def backend(cls, real_mongodb: str) -> Iterator[BackendUnderTest]:
            with Installation(real_mongodb) as inst:
                yield BackendUnderTest.from_url(inst.url)
