"""Fixtures for the file backend's own tests: fresh directories and a clock the test moves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentstores_file.stores import FileStores


class ManualClock:
    """A store clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"file://{tmp_path / 'store'}"


@pytest.fixture
async def stores(store_url: str) -> AsyncIterator[FileStores]:
    async with FileStores(store_url) as bundle:
        yield bundle
