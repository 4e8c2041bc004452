"""A fixed sample of the Redis adapter's mutants (docs/mutation-adapters.md): each is
planted in a copy of the adapter and the contract test named beside it must kill it, so
neither the mutator nor the kill machinery can rot unnoticed. The same tests first pass
with nothing planted: a kill is the mutant's doing, not a broken run."""

from __future__ import annotations

import pytest

from tests.mutation.adapters.mutants import ADAPTERS, by_id
from tests.mutation.adapters.run import run_suite

ADAPTER = ADAPTERS["redis"]
SUITE = "tests/redis/test_redis_contract.py::TestValkeyStandalone"
KNOWN = {
    "redis.header.never.2d92bd": "test_late_writes_are_refused",
    "redis.header.never.a403bb": "test_non_owner_write_is_refused",
    "redis.header.never.67430b": "test_stale_epoch_is_refused",
}
"""Mutant id -> the contract test that kills it (the erased, owner and fence checks of
the key-header rule every write script includes, each never holding)."""


def _select(*tests: str) -> tuple[str, ...]:
    return (SUITE, "-k", " or ".join(tests))


def test_the_sample_passes_unmutated() -> None:
    outcome = run_suite(
        ADAPTER, None, profile="mutation", timeout=240, select=_select(*KNOWN.values())
    )
    assert outcome["verdict"] == "survived", outcome


@pytest.mark.parametrize("mutant_id", sorted(KNOWN))
def test_a_known_mutant_is_killed(mutant_id: str) -> None:
    mutant = by_id(ADAPTER, mutant_id)
    outcome = run_suite(
        ADAPTER, mutant, profile="mutation", timeout=240, select=_select(KNOWN[mutant_id])
    )
    assert outcome["verdict"] == "killed", outcome
    assert KNOWN[mutant_id] in str(outcome["by"]), outcome
