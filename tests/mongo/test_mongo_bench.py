"""The raw floor keeps the harness's protocol, and ``agentstores bench`` runs on the
MongoDB backend beside it (a tiny run: numbers are not asserted, only that it works)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentstores.cli import main as cli_main
from agentstores_tools.bench.floor import RawFloor
from agentstores_tools.floors.mongo import MongoFloor
from tests.servers.mongo import Installation


async def test_the_floor_keeps_the_protocol(installed: Installation) -> None:
    floor: RawFloor = MongoFloor()
    await floor.setup(installed.url, 2)
    try:
        assert await floor.cas(0, 0) and await floor.cas(0, 1)
        assert not await floor.cas(0, 1)  # the stored value is 2 now
        assert await floor.cas(1, 0)
    finally:
        await floor.close()


async def test_bench_runs_with_the_floor(
    installed: Installation, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "--keep", "--url", installed.url, "--json", "--quiet", "--clients", "2"]
    args += ["--seconds", "0.1", "--warmup", "0.02", "--lengths", "none", "--ops", "cas,read"]
    assert await asyncio.to_thread(cli_main, args) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["backend"] == "mongo" and set(run["operations"]) == {"cas", "read"}
