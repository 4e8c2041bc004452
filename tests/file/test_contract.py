"""The whole contract suite against file:// in a fresh directory, multi-process tests too
(push on, the default: followers are woken by the change check), and the follower's
promises again with push off (followers poll)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite
from agentstores_contract.follow import FollowContract


class TestFileContract(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, tmp_path_factory: pytest.TempPathFactory) -> BackendUnderTest:
        root: Path = tmp_path_factory.mktemp("file-contract") / "store"
        return BackendUnderTest.from_url(f"file://{root}")


class TestFileFollowPolling(FollowContract):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, tmp_path_factory: pytest.TempPathFactory) -> BackendUnderTest:
        root: Path = tmp_path_factory.mktemp("file-polling") / "store"
        return BackendUnderTest.from_url(f"file://{root}?push=false")
