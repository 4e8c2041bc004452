"""The protocol contract run against the file backend (separate bundles per producer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentstores_contract import BackendUnderTest, ProtocolContract

pytest.importorskip("agentstores_file.stores", reason="the file backend is not installed")


class TestProtocolOnFile(ProtocolContract):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, tmp_path_factory: pytest.TempPathFactory) -> BackendUnderTest:
        root: Path = tmp_path_factory.mktemp("protocol-file")
        return BackendUnderTest.from_url(root.as_uri())
