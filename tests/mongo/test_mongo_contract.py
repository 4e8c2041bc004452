"""The whole contract suite against nx-27017 and, when ``MONGODB_URI`` is set, a real
MongoDB. The backend declares multi_process and durable, so the multi-process races and
the durability test run; it lacks only ``native_ttl``, ``cluster`` and ``settable_clock``
(the clock is the server's)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from agentstores_contract.follow import FollowContract
from tests.servers.mongo import MONGODB_URI_ENV, Installation, NxServer, with_option


class TestNx27017(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, nx_server: NxServer) -> Iterator[BackendUnderTest]:
        with Installation(nx_server.url) as inst:
            yield BackendUnderTest.from_url(inst.url)


class TestNx27017PushFollow(FollowContract):
    """The follower's promises again with push on: another bundle's writes wake it
    through the change stream (``protocol.follow.wakes``), and wake-ups dropped,
    repeated or late change nothing it yields."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, nx_server: NxServer) -> Iterator[BackendUnderTest]:
        with Installation(nx_server.url) as inst:
            yield BackendUnderTest.from_url(with_option(inst.url, "push", "true"))


if os.environ.get(MONGODB_URI_ENV):

    class TestRealMongoDB(ContractSuite):
        @pytest.fixture(scope="class")
        @classmethod
        def backend(cls, real_mongodb: str) -> Iterator[BackendUnderTest]:
            with Installation(real_mongodb) as inst:
                yield BackendUnderTest.from_url(inst.url)
