"""One network-fault run: the shared failover workload (tests/failover/workload.py)
through a :class:`~tests.servers.netfault.NetFaultProxy` while a
:class:`~tests.netfaults.schedule.FaultSchedule` breaks the network, then everything
read back around the proxy and counted.

Both checks run on the same history: tests/failover/checks.py (acknowledged writes lost,
double winners, fenced writes accepted, linearizability of the lease) and
:mod:`tests.netfaults.settle` (each unknown outcome settled, writes applied twice,
refusals that landed anyway).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from tests.failover.checks import Final, count
from tests.failover.workload import Config, run_workload
from tests.servers.netfault import NetFaultProxy

from .schedule import FAULTS, FaultSchedule
from .servers import REPLY_TIMEOUT, Target
from .settle import read_back, settle


async def run_once(
    target: Target,
    *,
    seed: int,
    config: Config,
    faults: tuple[str, ...] = FAULTS,
) -> dict[str, Any]:
    """Run the workload on ``target`` through a proxy under faults; the report (counts,
    settlement, the faults switched on and what they struck)."""
    proxy = await NetFaultProxy("127.0.0.1", target.port).start()
    schedule = FaultSchedule(proxy, seed, REPLY_TIMEOUT, faults=faults)
    # faults stop a little before the clients do, so the last calls meet a healed network
    faulty_for = max(config.duration - config.fault_at - 1.5, 0.5)

    async def fault() -> dict[str, Any]:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(faulty_for, stop.set)
        await schedule.run(until=stop)
        return {"steps": dict(schedule.steps), "struck": dict(proxy.stats)}

    started = time.monotonic()
    try:
        result = await run_workload(target.through(proxy.port), fault, config)
    finally:
        await proxy.close()
    finals = await read_back(target.direct, result)
    counts = count(
        result, {n: Final(frozenset(f.ids), f.state) for n, f in finals.items()}
    )
    settlement = settle(result, finals)
    return {
        "backend": target.backend,
        "seed": seed,
        "seconds": round(time.monotonic() - started, 1),
        "config": dataclasses.asdict(config),
        "faults": result.fault,
        "workers_failed": result.workers_failed,
        "counts": counts.as_dict(),
        "settlement": settlement.as_dict(),
    }


__all__ = ["run_once"]
