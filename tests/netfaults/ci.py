"""The short network-fault run each backend's tests make (tests/<backend>/): a few
seconds of the workload under faults, then every promise asserted on the history."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tests.failover.workload import Config

from .run import run_once
from .servers import Target

CONFIG = Config(
    conversations=3, bundles=2, clients_per_bundle=3, processes=0, duration=7.5, fault_at=1.5
)
"""Six clients on three conversations in this process, 7.5 s, faults from 1.5 s (once
the bundles are open: opening one is not what is under test)."""


def run_and_check(target: Target, *, seed: int, options: str = "") -> dict[str, Any]:
    """Run :data:`CONFIG` on ``target`` under faults and assert: nothing applied twice, no
    acknowledged write lost, no refusal or never-sent call that landed, no double winner
    or fenced write accepted, every call ended by the adapter itself with a typed error,
    every lease history linearizable, every unknown outcome settled by the read-back, and
    at least one unknown outcome (so the faults did hit calls)."""
    logging.getLogger("asyncpg").setLevel(logging.CRITICAL)
    report = asyncio.run(run_once(target, seed=seed, config=CONFIG, options=options))
    c, s = report["counts"], report["settlement"]
    shown = {k: v for k, v in report.items() if k not in ("config",)}
    assert s["twice"] == 0, shown
    assert c["lost"] == 0, shown
    assert s["denied_but_landed"] == 0, shown
    assert c["double_winners"] == 0 and c["fenced_accepted"] == 0, shown
    assert s["hung"] == 0 and s["untyped"] == 0, shown
    assert False not in c["linearizable"], shown
    assert sum(s["settled"].values()) == s["unknown"], shown
    assert s["unknown"] >= 1, f"no call met a fault: {shown}"
    return report
