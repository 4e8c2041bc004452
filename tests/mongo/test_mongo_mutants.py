"""A fixed sample of the MongoDB adapter's mutants (docs/mutation-adapters.md): each is
planted in a copy of the adapter and the test named beside it must kill it, so neither
the mutator nor the kill machinery can rot unnoticed. The same tests first pass with
nothing planted: a kill is the mutant's doing, not a broken run."""

from __future__ import annotations

import pytest

from tests.mutation.adapters.mutants import ADAPTERS
from tests.mutation.adapters.sample import killed_by, passes_unmutated

ADAPTER = ADAPTERS["mongo"]
KNOWN = {
    "mongo.header.filter.7d1b0f": "tests/mongo/test_mongo_contract.py::TestNx27017::"
    "test_writes_through_one_bundle_are_read_through_another",
    "mongo.pause_tokens.filter.f373e8": "tests/mongo/test_mongo_races.py::"
    "test_a_dead_writers_token_is_cleared_and_no_other",
    "mongo.state.filter.116593": "tests/mongo/test_mongo_races.py::"
    "test_a_save_that_lost_its_commit_removes_only_its_own_version",
}
"""Mutant id -> the test that kills it: a commit filter without the key (a write lands on
another key's header), a dead writer's token cleared without its ``_id`` (another key's
token in flight goes), a losing save's clean-up without its nonce (the winner's state
goes)."""


def test_the_sample_passes_unmutated() -> None:
    passes_unmutated(ADAPTER, (*KNOWN.values(),), timeout=240)


@pytest.mark.parametrize("mutant_id", sorted(KNOWN))
def test_a_known_mutant_is_killed(mutant_id: str) -> None:
    node = KNOWN[mutant_id]
    killed_by(ADAPTER, mutant_id, (node,), node.rsplit("::", 1)[1], timeout=240)
