"""The checks of a fixed sample of an adapter's mutants, which CI runs per adapter
(``tests/<adapter>/test_*mutants.py``): the tests that should kill the sample pass with
nothing planted, and each mutant planted is killed by the test named beside it."""

from __future__ import annotations

from tests.mutation.adapters.mutants import Adapter, by_id
from tests.mutation.adapters.run import run_suite


def passes_unmutated(adapter: Adapter, select: tuple[str, ...], timeout: float = 240) -> None:
    """The tests ``select`` names pass on the unmutated adapter: a kill is the mutant's."""
    outcome = run_suite(adapter, None, profile="mutation", timeout=timeout, select=select)
    assert outcome["verdict"] == "survived", outcome


def killed_by(
    adapter: Adapter, mutant_id: str, select: tuple[str, ...], test: str, timeout: float = 240
) -> None:
    """Mutant ``mutant_id`` planted, the tests ``select`` names fail, first ``test``."""
    mutant = by_id(adapter, mutant_id)
    outcome = run_suite(adapter, mutant, profile="mutation", timeout=timeout, select=select)
    assert outcome["verdict"] == "killed", outcome
    assert test in str(outcome["by"]), outcome
