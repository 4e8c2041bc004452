"""What every contract mixin shares: the ``backend`` fixture to override, and helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from agentstores.capabilities import Capability
from agentstores.keys import ConversationKey
from agentstores.stores import Stores

from . import profiles, runtime
from .backend import BackendUnderTest
from .strategies import fresh_tenant

T = TypeVar("T")


class ContractBase:
    """Base of every contract area. A test class (a subclass of :class:`ContractSuite` or
    of one area's class) overrides the ``backend`` fixture to return a BackendUnderTest:
    class-scoped, as a classmethod (``@pytest.fixture(scope="class")`` over
    ``@classmethod``); pytest deprecates a class-scoped fixture on the instance.

    Tests are synchronous: each runs its coroutine on a loop of its own
    (:meth:`run`), so the suite does not depend on any pytest-asyncio mode.
    """

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> BackendUnderTest:
        pytest.fail(
            "override the `backend` fixture to return a BackendUnderTest "
            "(or run pytest with --agentstores-url / --agentstores-factory)"
        )

    @property
    def profile(self) -> profiles.Profile:
        return profiles.active()

    @staticmethod
    def run(backend: BackendUnderTest, body: Callable[[Stores], Awaitable[T]]) -> T:
        return runtime.run(backend, body)

    @staticmethod
    def require(backend: BackendUnderTest, capability: Capability, why: str = "") -> None:
        """Skip, saying so, unless the backend declares ``capability``."""
        if not backend.has(capability):
            name = Capability.parse(capability).value
            reason = f"backend {backend.label!r} does not declare capability {name!r}"
            pytest.skip(f"{reason}: {why}" if why else reason)

    @staticmethod
    def tenant(label: str = "") -> str:
        return fresh_tenant(label)

    @staticmethod
    def key(session_id: str = "s", tenant: str | None = None) -> ConversationKey:
        """A key in a fresh tenant (or the given one)."""
        return ConversationKey(tenant or fresh_tenant(), session_id)
