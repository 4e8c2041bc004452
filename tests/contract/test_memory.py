"""The contract suite against the in-memory reference backend."""

from __future__ import annotations

import uuid

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite


class TestMemory(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> BackendUnderTest:
        return BackendUnderTest.from_url(f"memory://contract-{uuid.uuid4().hex}")
