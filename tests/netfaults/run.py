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
import contextlib
import dataclasses
import sys
import time
from collections.abc import AsyncIterator
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
    options: str = "",
) -> dict[str, Any]:
    """Run the workload on ``target`` through a proxy under faults (``options``: more
    URL options for the clients); the report (counts, settlement, the faults switched
    on and what they struck)."""
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
        async with _watchdog(config.duration + HANG_SLACK):
            result = await run_workload(target.through(proxy.port, options=options), fault, config)
    finally:
        await proxy.close()
    async with _watchdog(HANG_SLACK):
        finals = await read_back(target.direct, result)
    counts = count(result, {n: Final(frozenset(f.ids), f.state) for n, f in finals.items()})
    settlement = settle(result, finals)
    return {
        "backend": target.backend,
        "seed": seed,
        "seconds": round(time.monotonic() - started, 1),
        "config": dataclasses.asdict(config),
        "faults": result.fault,
        # the error each failed worker ended with (its traceback names local paths)
        "workers_failed": [_last_line(failure) for failure in result.workers_failed],
        "counts": counts.as_dict(),
        "settlement": settlement.as_dict(),
    }


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else text


HANG_SLACK = 120.0
"""Seconds past the workload's end after which a run counts as hung: every client call is
abandoned by the workload after ``call_timeout``, so only a hang outside the calls (a
bundle that never closes, say) can get here."""


@contextlib.asynccontextmanager
async def _watchdog(seconds: float) -> AsyncIterator[None]:
    """Fail with every task's await chain on stderr when the body outlives ``seconds``."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        for task in asyncio.all_tasks():
            print(f"task {task.get_name()}:", *_chain(task), sep="\n    ", file=sys.stderr)
        raise RuntimeError(f"the run hung: still going {seconds:g} s on (stacks above)") from None


def _chain(task: asyncio.Task[Any]) -> list[str]:
    """Where ``task`` waits: its coroutines, outermost first."""
    out: list[str] = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        frame = frame or getattr(coro, "gi_frame", None)
        if frame is not None:
            out.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return out


__all__ = ["HANG_SLACK", "run_once"]
