"""The whole contract suite against PostgreSQL, as the runtime role of a fresh schema:
the embedded PostgreSQL 18 at the run's profile, the machine's own (an older version) at
``quick``. What differs there is the server's version (its SQL and planner), which every
example meets; the generated depth is PostgreSQL 18's."""

from __future__ import annotations

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from agentstores_contract.follow import FollowContract
from agentstores_contract.profiles import PROFILES, Profile, active

from .conftest import MACHINE, PgServer


class OnServer:
    """Sections against the ``pg`` server of the moment, at its profile."""

    server = ""
    options = ""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, pg: PgServer) -> BackendUnderTest:
        cls.server = pg.name  # tests run grouped by server: a class-scoped parameter
        return BackendUnderTest.from_url(pg.url + cls.options)

    @property
    def profile(self) -> Profile:
        return PROFILES["quick"] if self.server == MACHINE else active()


class TestPostgresContract(OnServer, ContractSuite):
    """With push on (the default): the follower's promises hold with other bundles'
    writes pushed (``protocol.follow.wakes`` writes through the other bundle)."""


class TestPostgresPollFollow(OnServer, FollowContract):
    """The follower's promises again with push off: followers in other processes poll
    (``protocol.follow.wakes`` then writes through the follower's own bundle), and wake-ups
    dropped, repeated or late change nothing it yields."""

    options = "&push=false"
