"""Fixtures for core tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core._support import make_plugin_dir


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """A directory to put on PYTHONPATH: a third-party distribution with good and broken plugins."""
    return make_plugin_dir(tmp_path)
