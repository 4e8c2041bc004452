"""A few seconds of the shared recorded workload on moto (S3) through the fault proxy
(delays, lost replies, cuts, blackholes, partitions), every promise checked on the
history: see tests/netfaults/ci.py. The long run is ``python -m tests.netfaults``.
botocore's own resends are off here (max_attempts=1) so that a few seconds of faults
leave unknown outcomes to settle: with them, nearly every lost reply is resent and
recognised by its nonce before the call returns.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.netfaults.ci import run_and_check
from tests.netfaults.servers import Target, served


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with served("s3") as t:
        yield t


@pytest.mark.timeout(240)
def test_faults_leave_every_outcome_reported_and_settled(target: Target) -> None:
    run_and_check(target, seed=28, options="max_attempts=1&reconnect_window=1")
