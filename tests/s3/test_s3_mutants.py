"""A fixed sample of the S3 adapter's mutants (docs/mutation-adapters.md): each is planted
in a copy of the adapter and the test named beside it must kill it, so neither the mutator
nor the kill machinery can rot unnoticed. The same tests first pass with nothing planted:
a kill is the mutant's doing, not a broken run."""

from __future__ import annotations

import pytest

from tests.mutation.adapters.mutants import ADAPTERS
from tests.mutation.adapters.sample import killed_by, passes_unmutated

ADAPTER = ADAPTERS["s3"]
KNOWN = {
    "s3.client.header.2714ce": "tests/s3/test_s3_contract.py::TestMoto::"
    "test_racing_claims_leave_one_writer",
    "s3.client.header.2546d8": "tests/s3/test_s3_faults.py::"
    "test_a_lapsed_tombstone_is_removed_only_as_it_was_read",
}
"""Mutant id -> the test that kills it: a header replaced without its ``IfMatch`` (two
racing claimers both win), a lapsed tombstone removed blind (two claimers of a lapsed key
both win)."""


def test_the_sample_passes_unmutated() -> None:
    passes_unmutated(ADAPTER, (*KNOWN.values(),), timeout=300)


@pytest.mark.parametrize("mutant_id", sorted(KNOWN))
def test_a_known_mutant_is_killed(mutant_id: str) -> None:
    node = KNOWN[mutant_id]
    killed_by(ADAPTER, mutant_id, (node,), node.rsplit("::", 1)[1], timeout=300)
