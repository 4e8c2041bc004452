"""The protocol contract run against the in-memory reference backend."""

from __future__ import annotations

import uuid

import pytest

from agentstores_contract.backend import BackendUnderTest
from agentstores_contract.protocol import ProtocolContract


@pytest.mark.filterwarnings("ignore::UserWarning")
class TestProtocolOnMemory(ProtocolContract):
    @pytest.fixture(scope="class")
    def backend(self) -> BackendUnderTest:
        return BackendUnderTest.from_url(f"memory://protocol-contract-{uuid.uuid4().hex}")
