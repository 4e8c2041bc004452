"""The kill-and-resume drill (real producer processes SIGKILLed and SIGSTOPped mid-turn)
on nx-27017, and with the server itself SIGKILLed and restarted while the drill runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator

import pytest

from agentstores_tools.drill import Timings, run_drill
from tests.servers.mongo import Installation, NxServer

pytestmark = pytest.mark.timeout(600)

RESTART_TIMINGS = dataclasses.replace(Timings.fast(), heartbeat=0.5, dead_after=4.0)
"""The fast timings, but a lease outlives a server restart (nx-27017 is a Python process:
on a loaded machine it takes a second or two to listen again)."""


def _quiet(_line: str) -> None:
    return None


@pytest.fixture
def own_server() -> Iterator[tuple[NxServer, Installation]]:
    with NxServer() as server, Installation(server.url) as inst:
        yield server, inst


async def test_drill(installed: Installation) -> None:
    result = await run_drill(installed.url, timings=Timings.fast(), say=_quiet)
    assert result.passed, json.dumps(result.to_json(), indent=1)


@pytest.mark.parametrize("when", [1.5, 6.0])
async def test_drill_survives_a_server_crash(
    own_server: tuple[NxServer, Installation], when: float
) -> None:
    """The server SIGKILLed ``when`` seconds into the drill (round 1 or round 2) and
    started again on its data file: no message lost or doubled, no stale write lands."""
    server, inst = own_server
    drill = asyncio.create_task(run_drill(inst.url, timings=RESTART_TIMINGS, say=_quiet))
    done, _ = await asyncio.wait({drill}, timeout=when)
    assert not done, "the drill ended before the crash"
    await asyncio.to_thread(server.restart, crash=True)
    result = await drill
    assert result.passed, json.dumps(result.to_json(), indent=1)
