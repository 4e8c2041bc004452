"""The test module the plugin adds when --agentstores-url/--agentstores-factory is given."""

from __future__ import annotations

import pytest

from agentstores_contract.backend import BackendUnderTest
from agentstores_contract.pytest_plugin import configured_backend
from agentstores_contract.suite import ContractSuite


class TestAgentstoresContract(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, request: pytest.FixtureRequest) -> BackendUnderTest:
        backend: BackendUnderTest = configured_backend(request.config)
        return backend
