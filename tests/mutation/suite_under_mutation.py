"""The mutation run's test command: the whole contract suite against ``memory://``.

Copied into the mutation workspace as its only test module, so the tests import the
mutated ``agentstores`` that the mutation tool puts first on ``sys.path``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import agentstores
from agentstores_contract import BackendUnderTest, ContractSuite, lifetimes


def test_the_mutated_copy_is_under_test() -> None:
    """A run against the installed package would report every mutant as surviving."""
    assert "mutants" in Path(agentstores.__file__).parts, agentstores.__file__


class TestMemoryUnderMutation(ContractSuite):
    """A fresh backend per test: the mutation tool maps each function to the tests that
    call it, and a class-wide backend would credit its construction to the first test."""

    @pytest.fixture
    def backend(self) -> BackendUnderTest:
        return BackendUnderTest.from_url(f"memory://mutation-{uuid.uuid4().hex}")

    @pytest.fixture
    def real_time_problems(self, backend: BackendUnderTest) -> None:
        """Function-scoped like ``backend``. memory:// has a settable clock, so every
        lifetime is checked exactly in its own test and no real-time wait is needed."""
        assert lifetimes.exact(backend), "memory:// lost its settable clock"
