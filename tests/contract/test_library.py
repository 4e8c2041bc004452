"""The suite as a library: every area exported on its own, every module's assertions
explained however the plugin is loaded, and the documented way to adopt an area."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentstores_contract
from agentstores_contract import ContractBase, ContractSuite

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "contract_tests" / "README.md"
FENCE = re.compile(r"^```python\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)

BROKEN_BATCH = """
import pytest
from agentstores_contract.supervision_batch import SupervisionBatchContract
from tests.catalogue.mutants import batch_one_outcome


class TestBrokenBatch(SupervisionBatchContract):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls):
        return batch_one_outcome()
"""
"""A suite module the hand-kept rewrite list missed, against the mutant it must fail."""


def pytest_in(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "loading",
    [
        ["-p", "agentstores_contract.pytest_plugin"],
        ["-p", "agentstores_contract"],
        [],
    ],
    ids=["plugin-module", "entry-point-name", "autoload"],
)
def test_a_failing_suite_assertion_is_explained(tmp_path: Path, loading: list[str]) -> None:
    """pytest shows both sides of a failed ``assert got == want`` in a suite module, and
    registering the package raises no 'already imported' warning, in every way of
    loading the plugin (``-p`` with autoloading off is how many CI setups load it)."""
    (tmp_path / "test_broken.py").write_text(BROKEN_BATCH)
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} if loading else {}
    run = pytest_in(
        tmp_path,
        *loading,
        "-W",
        "error::pytest.PytestAssertRewriteWarning",
        "-k",
        "test_each_row_is_its_own_cas",
        "test_broken.py",
        env=env,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed" in run.stdout, run.stdout + run.stderr
    assert "Differing items:" in run.stdout, "the assertion was not rewritten:\n" + run.stdout
    assert "{'stale': (True, None)} != {'stale': (False, None)}" in run.stdout


def test_every_area_is_exported_and_the_suite_is_all_of_them() -> None:
    exported = {
        name: getattr(agentstores_contract, name)
        for name in agentstores_contract.__all__
        if name.endswith("Contract")
    }
    assert all(cls.__name__ == name for name, cls in exported.items())
    assert all(issubclass(cls, ContractBase) for cls in exported.values())
    assert set(ContractSuite.__bases__) == set(exported.values())
    assert agentstores_contract.ContractBase is ContractBase


def test_every_exported_name_resolves() -> None:
    for name in agentstores_contract.__all__:
        assert getattr(agentstores_contract, name) is not None, name
    with pytest.raises(AttributeError):
        agentstores_contract.NoSuchContract  # noqa: B018


def test_the_documented_area_adoption_runs_without_deprecation(tmp_path: Path) -> None:
    """The README's area-by-area example, with its URL pointed at memory://, passes with
    pytest's deprecations as errors (a class-scoped fixture on the instance is one)."""
    blocks = [m["body"] for m in FENCE.finditer(README.read_text()) if "class Test" in m["body"]]
    area = [b for b in blocks if "ContractSuite" not in b]
    assert len(area) == 1, "the README shows one area-by-area example"
    code = area[0].replace("mybackend://...", "memory://readme-areas")
    assert "memory://readme-areas" in code, "the example's URL is mybackend://..."
    (tmp_path / "test_readme_areas.py").write_text(textwrap.dedent(code))
    run = pytest_in(
        tmp_path,
        "-W",
        "error::pytest.PytestDeprecationWarning",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "--agentstores-profile",
        "quick",
        "test_readme_areas.py",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout and "failed" not in run.stdout, run.stdout
