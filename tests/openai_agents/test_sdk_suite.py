"""The SDK's own session tests (from its sdist, at the locked version) on every backend,
their store replaced by the bridge (see :mod:`.sdk_suite`). The tests that examine
SQLite itself are not collected: ``sdk_suite.NOT_APPLICABLE`` says why
(``test_sdk_suite_names`` checks that every test of the modules is run or listed there)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.servers.backends import Servers, fresh_tenant

from .sdk_suite import Backend, applicable_tests, fixtures

globals().update(fixtures())
globals().update(applicable_tests())


@pytest.fixture(autouse=True)
async def _on_backend(backend: str, bridge_servers: Servers) -> AsyncIterator[None]:
    async with bridge_servers.open(backend) as stores:
        Backend.stores, Backend.tenant = stores, fresh_tenant()
        try:
            yield
        finally:
            Backend.stores = None
