"""The kill-and-resume drill (real producer processes SIGKILLed and SIGSTOPped mid-turn)
on single-threaded moto, with the default liveness timings; and again with the S3
server itself SIGKILLed one second into each round's turn and started again from its
journal (tests/servers/moto.py), while the producer heartbeats, flushes and checkpoints."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from agentstores_tools.drill import Timings, render, run_drill
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
``reconnect_window``), and a lease whose heartbeat is older than ``dead_after`` is ended:
so ``dead_after`` must exceed the stall plus a beat interval plus the store clock's 1 s
resolution. A crash restart (a warm standby replaying each object's last write) is
0.4-1 s on a quiet machine (each call stalls up to 0.2 s longer: the adapter retries a
refused connection every 0.5 s), several seconds when six test sessions share two cores;
10 s covers a stall of up to ~7 s."""


async def test_drill_passes_with_the_server_crashed_in_every_round(tmp_path: Path) -> None:
    """The server SIGKILLed one second after each round's producer claims the turn, and
    started again from its journal, while the producer heartbeats, flushes and
    checkpoints (the second restart replays everything the first round wrote too)."""
    restarts: list[threading.Thread] = []
    outages: list[float] = []
    with MotoServer(journal=str(tmp_path / "journal")) as server:
        server.create_bucket(BUCKET)
        server.prepare_restarts(2)
        lines: list[str] = []

        def crash() -> None:
            began = time.monotonic()
            server.restart(crash=True)
            outages.append(round(time.monotonic() - began, 2))

        def say(line: str) -> None:
            lines.append(line)
            if "claimed the turn" in line and len(restarts) < 2:
                timer = threading.Timer(1.0, crash)
                timer.start()
                restarts.append(timer)

        url = with_prefix(server.url(BUCKET))
        result = await run_drill(url, timings=RESTART_TIMINGS, say=say)
        for timer in restarts:
            timer.join()
        report = "\n".join(lines) + render(result) + f"\noutages (s): {outages}"
        print(f"server outages (kill to serving again, s): {outages}")  # shown with -s
        assert len(outages) == 2, report
        assert result.passed, report
