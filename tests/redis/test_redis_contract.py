"""The whole contract suite against Valkey 9 standalone, a Valkey 9 cluster and Redis 7.

On Valkey (AOF on) every write waits for its fsync (``wait_aof_local=1``), so the bundle
declares ``durable`` and the durability test runs; Redis 7.0 has no WAITAOF, so there the
suite runs the default write path and skips only that test (a capability it lacks).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from tests.servers.valkey import ValkeyCluster, ValkeyServer

from .conftest import purge, with_prefix


class TestValkeyStandalone(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, valkey_server: ValkeyServer) -> Iterator[BackendUnderTest]:
        url = with_prefix(valkey_server.url) + "&wait_aof_local=1"
        yield BackendUnderTest.from_url(url)
        purge(url)


class TestValkeyCluster(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, valkey_cluster: ValkeyCluster) -> Iterator[BackendUnderTest]:
        url = with_prefix(valkey_cluster.url) + "&wait_aof_local=1"
        yield BackendUnderTest.from_url(url)
        purge(url)


class TestRedis7(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, redis7_base: str) -> Iterator[BackendUnderTest]:
        url = with_prefix(redis7_base)
        yield BackendUnderTest.from_url(url)
        purge(url)
