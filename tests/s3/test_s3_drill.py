"""The kill-and-resume drill (real producer processes SIGKILLed and SIGSTOPped mid-turn)
on single-threaded moto, with the default liveness timings. (A server restart mid-drill is
not run here: moto keeps its objects in memory, so a restarted moto has lost them all.)"""

from __future__ import annotations

from agentstores.drill import Timings, run_drill
from tests.servers.moto import MotoServer

from .conftest import BUCKET, purge, with_prefix


def _quiet(_line: str) -> None:
    return None


S3_TIMINGS = Timings(
    heartbeat=1.0, dead_after=3.0, flush=0.2, checkpoint=1.0, tick=0.05, chunk=4, length=400
)
"""The default liveness (heartbeat 1 s, dead after 3 s) with short turns: the store clock
comes from 1-second ``Date`` headers, so the drill's fast 1 s ``dead_after`` is below
what two processes' readings of it can tell apart (README: the store clock)."""


async def test_drill_on_moto(moto_server: MotoServer) -> None:
    url = with_prefix(moto_server.url(BUCKET))
    try:
        result = await run_drill(url, timings=S3_TIMINGS, say=_quiet)
        assert result.passed, result.to_json()
    finally:
        purge(url)
