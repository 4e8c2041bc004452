"""The whole contract suite against file:// in a fresh directory, multi-process tests too."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentstores_contract import BackendUnderTest, ContractSuite


class TestFileContract(ContractSuite):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, tmp_path_factory: pytest.TempPathFactory) -> BackendUnderTest:
        root: Path = tmp_path_factory.mktemp("file-contract") / "store"
        return BackendUnderTest.from_url(f"file://{root}")
