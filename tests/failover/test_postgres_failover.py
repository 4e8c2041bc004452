"""One short failover of a PostgreSQL primary with a synchronous standby, under the
recorded workload: nothing acknowledged is lost, no epoch has two winners and no fenced
write is accepted, and the failover really happened (so the test cannot pass on a run
that never moved). The standby streams over a link with latency that the fault severs
with the primary (its host is lost), the fault under which asynchronous replication
loses acknowledged writes. The long drills are the ``failover`` session's."""

from __future__ import annotations

from agentstores_postgres.urls import parse_url
from tests.failover.checks import count, read_back
from tests.failover.postgres import LINK_DELAY, replicated
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


async def test_synchronous_standby_failover_keeps_every_promise() -> None:
    async with replicated("sync", link_delay=LINK_DELAY) as target:
        result = await run_workload(target.url, target.fault, SHORT)
        finals = await read_back(target.url, result)
    counts = count(result, finals)
    summary = f"{counts.as_dict()} fault={result.fault} workers={result.workers_failed}"
    assert result.workers_failed == [], summary
    assert result.fault["failovers"] == 1, summary
    assert result.acked_after_fault() > 0, summary  # the clients reached the new primary
    assert counts.acked > 100 and counts.claims_won > 10, summary
    assert counts.lost == 0, summary
    assert counts.double_winners == 0, summary
    assert counts.fenced_accepted == 0, summary
    assert counts.linearizable == [True] * SHORT.conversations, summary


def test_a_multi_host_url_reaches_the_driver_whole() -> None:
    """The drill's URL form: every host, and ``target_session_attrs``, handed to asyncpg
    (which tries the hosts in turn for the one that takes writes)."""
    config = parse_url(
        "postgresql://app:pw@10.0.0.1:5432,10.0.0.2:5433/chat"
        "?schema=s&target_session_attrs=read-write"
    )
    assert config.dsn == (
        "postgresql://app:pw@10.0.0.1:5432,10.0.0.2:5433/chat?target_session_attrs=read-write"
    )
    assert config.schema == "s"
    assert "pw" not in repr(config)
