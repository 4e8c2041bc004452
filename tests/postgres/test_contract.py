"""The whole contract suite against PostgreSQL, as the runtime role of a fresh schema."""

from __future__ import annotations

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite

from .conftest import PgServer


class TestPostgresContract(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, pg: PgServer) -> BackendUnderTest:
        return BackendUnderTest.from_url(pg.url)
