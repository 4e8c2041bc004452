"""The kill-and-resume drill (real producer processes SIGKILLed and SIGSTOPped mid-turn)
on single-threaded moto, with the default liveness timings; and again with the S3
server itself SIGKILLed one second into each round's turn and started again from its
journal (tests/servers/moto.py) one second into the first round's turn, while the
producer heartbeats, flushes and checkpoints."""

from __future__ import annotations

import threading
from pathlib import Path

from agentstores.drill import Timings, render, run_drill
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


RESTART_TIMINGS = Timings(
    heartbeat=1.0, dead_after=10.0, flush=0.2, checkpoint=1.0, tick=0.05, chunk=4, length=400
)
"""A producer's heartbeat stalls while the server is down (the adapter keeps trying for
``reconnect_window``), and a heartbeat slower than ``dead_after`` ends the lease: so
``dead_after`` must exceed the outage. moto's restart (a fresh process importing moto and
replaying its journal) is seconds long on a loaded machine."""


async def test_drill_passes_with_the_server_crashed_mid_turn(tmp_path: Path) -> None:
    restarts: list[threading.Thread] = []
    with MotoServer(journal=str(tmp_path / "journal")) as server:
        server.create_bucket(BUCKET)
        server.prepare_restarts(1)
        lines: list[str] = []

        def say(line: str) -> None:
            lines.append(line)
            if "claimed the turn" in line and not restarts:
                timer = threading.Timer(1.0, server.restart, kwargs={"crash": True})
                timer.start()
                restarts.append(timer)

        url = with_prefix(server.url(BUCKET))
        result = await run_drill(url, timings=RESTART_TIMINGS, say=say)
        for timer in restarts:
            timer.join()
        assert len(restarts) == 1, "\n".join(lines) + render(result)
        assert result.passed, "\n".join(lines) + render(result)
