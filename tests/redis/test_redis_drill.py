"""The kill-and-resume drill (real producer processes SIGKILLed and SIGSTOPped mid-turn)
on Valkey standalone and cluster, and with the server itself crashed and restarted
(AOF on, appendfsync always) while the drill runs."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentstores_tools.drill import Timings, run_drill
from tests.servers.valkey import ValkeyCluster, ValkeyServer

from .conftest import with_prefix


def _quiet(_line: str) -> None:
    return None


async def test_drill_on_cluster(valkey_cluster: ValkeyCluster) -> None:
    result = await run_drill(with_prefix(valkey_cluster.url), timings=Timings.fast(), say=_quiet)
    assert result.passed, json.dumps(result.to_json(), indent=1)


@pytest.mark.parametrize("when", [1.5, 6.0])
async def test_drill_survives_a_server_crash(when: float) -> None:
    """A standalone server SIGKILLed ``when`` seconds into the drill (round 1 or round 2)
    and started again from its AOF: no message lost or doubled, no stale write lands.

    The calls wait out the restart (``reconnect_window``, 3 s by default, is set to what
    a restart takes here: on a loaded machine starting the server and replaying its AOF
    took longer than 3 s, and a worker's call gave up while the drill ran)."""
    with ValkeyServer(appendonly=True, appendfsync="always") as server:
        url = with_prefix(server.url) + "&reconnect_window=15"
        drill = asyncio.create_task(run_drill(url, timings=Timings.fast(), say=_quiet))
        done, _ = await asyncio.wait({drill}, timeout=when)
        assert not done, "the drill ended before the crash"
        await asyncio.to_thread(server.restart, crash=True)
        result = await drill
        assert result.passed, json.dumps(result.to_json(), indent=1)
