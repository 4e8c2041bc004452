"""The kill-and-resume drill (real producer processes SIGKILLed and SIGSTOPped mid-turn)
on single-threaded moto. (A server restart mid-drill is not run here: moto keeps its
objects in memory, so a restarted moto has lost every object, acknowledged or not.)"""

from __future__ import annotations

from agentstores.drill import Timings, run_drill
from tests.servers.moto import MotoServer

from .conftest import BUCKET, purge, with_prefix


def _quiet(_line: str) -> None:
    return None


async def test_drill_on_moto(moto_server: MotoServer) -> None:
    url = with_prefix(moto_server.url(BUCKET))
    try:
        result = await run_drill(url, timings=Timings.fast(), say=_quiet)
        assert result.passed, result.to_json()
    finally:
        purge(url)
