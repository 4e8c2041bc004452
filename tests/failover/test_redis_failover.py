"""One short failover of a Valkey primary under Sentinel, under the recorded workload:
the clients follow the Sentinels to the promoted replica (acknowledged calls after the
fault), and with ``wait_replicas=1`` nothing acknowledged is lost, no epoch has two
winners and no fenced write is accepted. The failover must really happen, so the test
cannot pass on a run that never moved. The long drills are the ``failover`` session's."""

from __future__ import annotations

from tests.failover.checks import count, read_back
from tests.failover.redis import sentinel_group
from tests.failover.workload import Config, run_workload

SHORT = Config(
    conversations=3,
    bundles=2,
    clients_per_bundle=3,
    processes=1,
    process_bundles=1,
    duration=5.0,
    fault_at=1.5,
)


async def test_clients_follow_sentinel_to_the_new_primary_and_keep_every_promise() -> None:
    async with sentinel_group("wait") as target:
        result = await run_workload(target.url, target.fault, SHORT)
        finals = await read_back(target.url, result)
    counts = count(result, finals)
    summary = f"{counts.as_dict()} fault={result.fault} workers={result.workers_failed}"
    assert result.workers_failed == [], summary
    assert result.fault["failovers"] == 1, summary
    assert result.acked_after_fault() > 0, summary  # the clients reached the new primary
    assert counts.acked > 20 and counts.claims_won > 3, summary  # a loaded machine: few
    assert counts.lost == 0, summary
    assert counts.double_winners == 0, summary
    assert counts.fenced_accepted == 0, summary
    assert counts.linearizable == [True] * SHORT.conversations, summary
