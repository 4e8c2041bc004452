"""The files adapter's mutation run's test command: the whole contract suite against a
fresh ``file://`` store per test.

Copied into the ``.mutation-file`` workspace beside the adapter's own fast tests
(``tests/adapter/``, from ``tests/file``), so the tests import the mutated
``agentstores_file`` that the mutation tool puts first on ``sys.path``; core
(``agentstores``) and the contract suite are the installed, unmutated packages.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agentstores_file
from agentstores_contract import BackendUnderTest, ContractSuite, lifetimes

MUTATED = str(Path(agentstores_file.__file__).resolve().parents[1])
"""The folder the mutated copy is imported from: the multi-process tests' workers are
started as ``python -m`` and find it through PYTHONPATH, so they run the mutant too."""
os.environ["PYTHONPATH"] = os.pathsep.join(
    [MUTATED, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)


def test_the_mutated_copy_is_under_test() -> None:
    """A run against the installed package would report every mutant as surviving."""
    assert "mutants" in Path(agentstores_file.__file__).parts, agentstores_file.__file__


class TestFileUnderMutation(ContractSuite):
    """A fresh store per test: the mutation tool maps each function to the tests that
    call it, and a class-wide store would credit its construction to the first test."""

    @pytest.fixture
    def backend(self, tmp_path: Path) -> BackendUnderTest:
        return BackendUnderTest.from_url(f"file://{tmp_path / 'store'}")

    @pytest.fixture
    def real_time_problems(self, backend: BackendUnderTest) -> None:
        """Function-scoped like ``backend``. file:// has a settable clock, so every
        lifetime is checked exactly in its own test and no real-time wait is needed."""
        assert lifetimes.exact(backend), "file:// lost its settable clock"
