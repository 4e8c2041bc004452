"""The whole contract suite against PostgreSQL, as the runtime role of a fresh schema."""

from __future__ import annotations

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from agentstores_contract.follow import FollowContract

from .conftest import PgServer


class TestPostgresContract(ContractSuite):
    """With push on (the default): the follower's promises hold with other bundles'
    writes pushed (``protocol.follow.wakes`` writes through the other bundle)."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, pg: PgServer) -> BackendUnderTest:
        return BackendUnderTest.from_url(pg.url)


class TestPostgresPollFollow(FollowContract):
    """The follower's promises again with push off: followers in other processes poll
    (``protocol.follow.wakes`` then writes through the follower's own bundle), and wake-ups
    dropped, repeated or late change nothing it yields."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, pg: PgServer) -> BackendUnderTest:
        return BackendUnderTest.from_url(pg.url + "&push=false")
