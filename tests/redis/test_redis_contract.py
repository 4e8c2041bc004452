"""The whole contract suite against Valkey 9 standalone, a Valkey 9 cluster, a Valkey
primary found through Sentinel, the machine's own Redis (7.0 here) when installed, and the
server $AGENTSTORES_TEST_REDIS_URL names.

On Valkey (AOF on) every write waits for its fsync (``wait_aof_local=1``), so the bundle
declares ``durable`` and the durability test runs; Redis 7.0 has no WAITAOF, so there the
suite runs the default write path and skips only that test (a capability it lacks).

Push is on (the default on one server; spelled out for Valkey, the cluster's default
being off): the follower's promises run with
another bundle's writes waking the follower over sharded pub/sub, on one server and on
the cluster; ``TestValkeyPollingFollow`` runs them again with push off (followers poll).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from agentstores_contract.follow import FollowContract
from agentstores_contract.profiles import PROFILES, Profile
from tests.servers.valkey import ValkeyCluster, ValkeySentinelGroup, ValkeyServer

from .conftest import EXTERNAL, MACHINE, purge, with_prefix


class TestValkeyStandalone(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, valkey_server: ValkeyServer) -> Iterator[BackendUnderTest]:
        url = with_prefix(valkey_server.url) + "&wait_aof_local=1&push=true"
        yield BackendUnderTest.from_url(url)
        purge(url)


class TestValkeyCluster(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, valkey_cluster: ValkeyCluster) -> Iterator[BackendUnderTest]:
        url = with_prefix(valkey_cluster.url) + "&wait_aof_local=1&push=true"
        yield BackendUnderTest.from_url(url)
        purge(url)


class TestValkeySentinel(ContractSuite):
    """Through ``redis+sentinel://``: the same client over redis-py's Sentinel pool, every
    write waiting for its fsync, push on. The ``quick`` profile for its own rounds: what
    differs from standalone is how connections find the primary, not the scripts
    (test_redis_sentinel.py fails the primary over; the failover drill measures
    ``wait_replicas``, which here would wait on two replicas fsyncing the suite's 64 MB
    appends on a loaded machine for longer than ``socket_timeout``)."""

    @property
    def profile(self) -> Profile:
        return PROFILES["quick"]

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, valkey_sentinel: ValkeySentinelGroup) -> Iterator[BackendUnderTest]:
        url = with_prefix(valkey_sentinel.url) + "&wait_aof_local=1&push=true"
        yield BackendUnderTest.from_url(url)
        purge(url)


class TestValkeyPollingFollow(FollowContract):
    """The follower's promises with push off: a follower in another process polls."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, valkey_server: ValkeyServer) -> Iterator[BackendUnderTest]:
        url = with_prefix(valkey_server.url) + "&push=false"
        yield BackendUnderTest.from_url(url)
        purge(url)


if MACHINE is not None:

    class TestMachineRedis(ContractSuite):
        """The machine's own Redis (7.0 here), started privately from its redis-server.
        The ``quick`` profile: what differs from Valkey 9 is the server's version (its
        commands and replies), which every example meets; the depth is Valkey's."""

        @property
        def profile(self) -> Profile:
            return PROFILES["quick"]

        @pytest.fixture(scope="class")
        @classmethod
        def backend(cls, machine_redis: ValkeyServer) -> Iterator[BackendUnderTest]:
            url = with_prefix(machine_redis.url)
            yield BackendUnderTest.from_url(url)
            purge(url)


if EXTERNAL:

    class TestExternalRedis(ContractSuite):
        """The server $AGENTSTORES_TEST_REDIS_URL names (a managed Redis, a cluster, ...)."""

        @pytest.fixture(scope="class")
        @classmethod
        def backend(cls) -> Iterator[BackendUnderTest]:
            assert EXTERNAL is not None
            url = with_prefix(EXTERNAL)
            yield BackendUnderTest.from_url(url)
            purge(url)
