"""ADK's own session-service contract tests, run against agentstores-adk on every backend.

ADK's tests ship in no package: ``$AGENTSTORES_ADK_SRC`` names a checkout of
google/adk-python at the version nearest the locked google-adk (this file fails, never
skips, without it). Its ``tests/unittests/sessions/test_session_service.py`` is imported
as it is; every test there that takes the ``session_service`` fixture (the contract every
``BaseSessionService`` owes its callers, in ADK's own words) runs here with that fixture
replaced by one that builds the bridge on each backend. Nothing else is changed.

Not run: the module's tests of ADK's own store classes (they take no ``session_service``:
DatabaseSessionService's engine and SQL, SqliteSessionService, InMemorySessionService's
copies, VertexAiSessionService), and the two tests that parametrize ``session_service``
with an ``InMemorySessionService`` themselves. The contract tests the bridge answers
differently, on purpose, are marked ``xfail(strict=True)`` with the reason, as ADK's own
``_conformance.BACKENDS`` records its backends' divergences: one that starts passing
fails the run.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentstores_adk import AgentStoresSessionService
from tests.servers.backends import Servers, fresh_tenant

SOURCE_ENV = "AGENTSTORES_ADK_SRC"
PACKAGE = "adk_upstream_tests"
"""The name ADK's ``tests/unittests`` is imported under (``tests`` is this repository's)."""
MODULE = f"{PACKAGE}.sessions.test_session_service"

DIVERGENCES = {
    "test_list_sessions_all_users": (
        "list_sessions(user_id=None) lists the acting principal's own sessions, never "
        "every user's: no principal may see another's conversations"
    ),
}
"""Contract test -> why the bridge answers it differently (xfail, strict)."""


class _FakeRedisNotInCheckout:
    """Stands in for ``tests/unittests/integrations/redis/_fake_redis.py`` when the
    checkout lacks it: only ADK's own Redis entry in ``_conformance`` uses it, and that
    entry is not run here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the checkout has no tests/unittests/integrations/redis/_fake_redis.py")


def _load() -> types.ModuleType:
    root = os.environ.get(SOURCE_ENV)
    if not root:
        raise RuntimeError(f"set ${SOURCE_ENV} to a checkout of google/adk-python")
    base = Path(root) / "tests" / "unittests"
    if not (base / "sessions" / "test_session_service.py").is_file():
        raise RuntimeError(
            f"${SOURCE_ENV}={root} has no tests/unittests/sessions/test_session_service.py"
        )
    for name, path in (
        (PACKAGE, base),
        (f"{PACKAGE}.sessions", base / "sessions"),
        (f"{PACKAGE}.integrations", base / "integrations"),
        (f"{PACKAGE}.integrations.redis", base / "integrations" / "redis"),
    ):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(path)]
            sys.modules[name] = package
    fake = f"{PACKAGE}.integrations.redis._fake_redis"
    if not (base / "integrations" / "redis" / "_fake_redis.py").is_file():
        stand_in = types.ModuleType(fake)
        stand_in.FakeRedisAsync = _FakeRedisNotInCheckout  # type: ignore[attr-defined]
        sys.modules.setdefault(fake, stand_in)
    return importlib.import_module(MODULE)


def _parametrizes_the_service(test: Any) -> bool:
    for mark in getattr(test, "pytestmark", []):
        if mark.name == "parametrize" and "session_service" in str(mark.args[0]):
            return True
    return False


_upstream = _load()
CONTRACT = sorted(
    name
    for name, value in vars(_upstream).items()
    if name.startswith("test_")
    and callable(value)
    and "session_service" in inspect.signature(value).parameters
    and not _parametrizes_the_service(value)
)
"""The contract tests run here (each once per backend)."""
for _name in CONTRACT:
    globals()[_name] = getattr(_upstream, _name)
local_timezone_with_dst = _upstream.local_timezone_with_dst


@pytest.fixture
async def session_service(
    request: pytest.FixtureRequest, backend: str, bridge_servers: Servers
) -> AsyncIterator[AgentStoresSessionService]:
    """The bridge on ``backend``, in a fresh tenant. ADK's tests name many users and act
    as each, so the identity resolver here trusts ``user_id`` (the test is the
    application; behind ADK's API server a resolver must not)."""
    reason = DIVERGENCES.get(request.node.originalname)
    if reason is not None:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))
    tenant = fresh_tenant()
    async with bridge_servers.open(backend) as stores:
        service = AgentStoresSessionService(stores, identity=lambda app, user: (tenant, user))
        yield service
        await service.flush()


def test_every_divergence_names_a_contract_test() -> None:
    """A divergence keyed on anything else would excuse nothing."""
    assert set(DIVERGENCES) <= set(CONTRACT)
