"""langgraph-checkpoint-conformance against AgentStoresSaver on every backend.

The suite is a library: each capability gets a fresh saver from the registered factory
(here: a fresh tenant on the backend, so suites never see each other's threads).
Base capabilities must all pass; of the extended ones this saver implements
``copy_thread``; prune and delete_for_runs would remove rows from the middle of an
append-only log, which no store operation does (the package README says why), so the
suite reports them as not implemented.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from agentstores_langgraph import AgentStoresSaver
from tests.servers.backends import Servers, fresh_tenant

EXTENDED = {"copy_thread": 8}


async def test_conformance(backend: str, bridge_servers: Servers) -> None:
    failures: list[str] = []

    async def factory() -> AsyncIterator[AgentStoresSaver]:
        async with bridge_servers.open(backend) as stores:
            yield AgentStoresSaver(stores, tenant=fresh_tenant(), principal="alice")

    def on_result(capability: str, name: str, ok: bool, error: str | None) -> None:
        if not ok:
            failures.append(f"{capability}.{name}:\n{error}")

    registered = checkpointer_test(name=f"AgentStoresSaver[{backend}]")(factory)
    report = await validate(registered, progress=ProgressCallbacks(on_test_result=on_result))
    report.print_report()
    assert not failures, "\n".join(failures)
    assert report.passed_all_base()
    counts = {
        cap: (result.tests_passed, result.tests_failed) for cap, result in report.results.items()
    }
    base = sum(counts[c][0] for c in ("put", "put_writes", "get_tuple", "list", "delete_thread"))
    assert base == 58, counts
    for capability, passed in EXTENDED.items():
        assert counts[capability] == (passed, 0), counts
