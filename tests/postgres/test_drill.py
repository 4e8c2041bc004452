"""The kill-and-resume drill on PostgreSQL: worker processes, a SIGKILLed and a SIGSTOPped
producer, and (on a private server) PostgreSQL itself restarted in the middle of turns."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agentstores.cli import main as cli_main
from agentstores.urls import redact_url
from agentstores_tools.drill import Timings, render, run_drill
from tests.servers.postgres import EmbeddedPostgres, Installation
from tests.tools.leaks import PASSWORD, ChildCommandLines, with_password

from .conftest import PgServer


async def test_drill_passes(pg: PgServer) -> None:
    lines: list[str] = []
    result = await run_drill(pg.url, timings=Timings.fast(), say=lines.append)
    assert result.passed, "\n".join(lines) + render(result)
    for r in result.rounds:
        assert r.follower["rollbacks"] == 0 and r.follower["divergences"] == 0
    (pause,) = [r for r in result.rounds if r.stale_writes is not None]
    assert pause.stale_writes is not None and pause.stale_writes["landed"] == []


async def test_drill_passes_with_the_server_restarted_mid_turn() -> None:
    """PostgreSQL restarts (fast shutdown: every connection is cut, in-flight
    transactions roll back) one second into each round's turn, while the producer
    heartbeats, flushes and checkpoints. Adapters wait for the server to come back,
    reconcile writes cut in flight, and the drill's every check still holds."""
    restarts: list[threading.Thread] = []
    with EmbeddedPostgres() as server:
        async with Installation(server.url) as inst:
            lines: list[str] = []

            def say(line: str) -> None:
                lines.append(line)
                if "claimed the turn" in line:
                    timer = threading.Timer(1.0, server.restart)
                    timer.start()
                    restarts.append(timer)

            result = await run_drill(inst.url, timings=Timings(), say=say)
            for timer in restarts:
                timer.join()
            assert len(restarts) == 2, "\n".join(lines)
            assert result.passed, "\n".join(lines) + render(result)


def test_the_url_password_reaches_no_worker_command_line_and_no_output(
    pg: PgServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any local user reads a process's command line: the workers get the URL another
    way, and the report shows it with its password masked."""
    url = with_password(pg.url)
    report = tmp_path / "drill.json"
    with ChildCommandLines() as seen:
        code = cli_main(["drill", url, "--fast", "--rounds", "kill", "--json", str(report)])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    workers = [line for line in seen.lines if "drill.worker" in line]
    assert len(workers) >= 3, seen.lines  # follower, standby and producer
    assert not [line for line in workers if PASSWORD in line], workers
    assert PASSWORD not in out.out + out.err + report.read_text()
    assert redact_url(url) in out.out
