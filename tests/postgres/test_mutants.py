"""A fixed sample of the PostgreSQL adapter's mutants (docs/mutation-adapters.md): each is
planted in a copy of the adapter and the contract test named beside it must kill it, so
neither the mutator nor the kill machinery can rot unnoticed. The same tests first pass
with nothing planted: a kill is the mutant's doing, not a broken run."""

from __future__ import annotations

import pytest

from tests.mutation.adapters.mutants import ADAPTERS
from tests.mutation.adapters.sample import killed_by, passes_unmutated

ADAPTER = ADAPTERS["postgres"]
SUITE = "tests/postgres/test_contract.py::TestPostgresContract"
KNOWN = {
    "postgres.check_write.never.64f6bb": "test_late_writes_are_refused",
    "postgres.check_write.never.c0277a": "test_non_owner_write_is_refused",
    "postgres.check_write.never.ac3fa4": "test_stale_epoch_is_refused",
}
"""Mutant id -> the contract test that kills it (the erased, owner and fence checks of
every fenced write, each never holding)."""


def _select(*tests: str) -> tuple[str, ...]:
    return (SUITE, "-k", f"not machine and ({' or '.join(tests)})")


def test_the_sample_passes_unmutated() -> None:
    passes_unmutated(ADAPTER, _select(*KNOWN.values()))


@pytest.mark.parametrize("mutant_id", sorted(KNOWN))
def test_a_known_mutant_is_killed(mutant_id: str) -> None:
    test = KNOWN[mutant_id]
    killed_by(ADAPTER, mutant_id, _select(test), test)
