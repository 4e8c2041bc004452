"""Fixtures for the zav SDK bridge: bundles on memory:// and file://.

The two-server proof (``test_perf_servers.py``) brings its own servers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agentstores_zav import Bundle
from tests.zav.timings import KILL_ROUND_TIMES

BACKENDS = ("memory", "file")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not KILL_ROUND_TIMES:
        return
    terminalreporter.section("zav kill round: seconds after POST /perf/kill (loaded machine)")
    for times in KILL_ROUND_TIMES:
        terminalreporter.write_line(json.dumps(times))


def pytest_configure(config: pytest.Config) -> None:
    # memory:// warns that nothing survives a restart: known, and not what these test.
    config.addinivalue_line("filterwarnings", "ignore::agentstores.EphemeralStoreWarning")


def bundle_url(backend: str, tmp_path: Path) -> str:
    if backend == "memory":
        return f"memory://zav-{uuid.uuid4().hex}"
    return f"file://{tmp_path / 'stores'}"


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on each in-process backend."""
    return bundle_url(request.param, tmp_path)


@pytest.fixture
async def bundles(url: str) -> AsyncIterator[Callable[..., Bundle]]:
    """Make bundles on ``url`` (each one a replica's), closed after the test."""
    made: list[Bundle] = []

    def make(**options: object) -> Bundle:
        bundle = Bundle(url, **options)
        made.append(bundle)
        return bundle

    yield make
    for bundle in made:
        await bundle.close()
