"""The bench harness runs end to end on memory:// and file:// with tiny sizes.

Shape and correctness only (every operation succeeds, every section is present);
nothing here asserts a speed.
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

from agentstores.errors import UsageError
from agentstores.memory.stores import EphemeralStoreWarning
from agentstores.plugins import get_registry
from agentstores_tools.bench.floor import RawFloor
from agentstores_tools.bench.harness import OPERATIONS, BenchConfig, run_bench
from agentstores_tools.bench.report import render
from agentstores_tools.bench.stats import Sample, percentile
from agentstores_tools.floors.memory import MemoryFloor

TINY: dict[str, Any] = {
    "clients": 2,
    "seconds": 0.2,
    "warmup": 0.05,
    "rounds": 2,
    "lengths": (3, 25),
    "capacity": True,
    "capacity_window": 1.0,
    "capacity_budget": 10.0,
    "capacity_start": 2,
    "capacity_max": 4,
}

SUMMARY_KEYS = {"clients", "ops", "seconds", "ops_per_s", "p50_ms", "p99_ms", "max_ms", "errors"}


def check_summary(s: dict[str, Any], clients: int) -> None:
    assert set(s) >= SUMMARY_KEYS
    assert s["clients"] == clients
    assert s["errors"] == 0, s.get("first_error")
    assert s["ops"] > 0 and s["ops_per_s"] > 0
    assert 0 <= s["p50_ms"] <= s["p99_ms"] <= s["max_ms"]


def check_result(r: dict[str, Any], backend: str, *, expect_floor: bool) -> None:
    assert r["backend"] == backend
    assert r["clients"] == TINY["clients"]
    assert set(r["operations"]) == set(OPERATIONS)
    for s in r["operations"].values():
        check_summary(s, TINY["clients"])
    if expect_floor:
        assert isinstance(r["floor"]["name"], str) and r["floor"]["name"]
        check_summary(r["floor"]["cas"], TINY["clients"])
        ratio = dict(r["ratio"])
        rounds, median = ratio.pop("rounds"), ratio.pop("rounds_median")
        usage = ratio.pop("client_usage")
        assert set(usage) == {"adapter", "floor"}
        for side in usage.values():
            assert side["cpu_ms_per_op"] >= 0 and side["voluntary_switches_per_op"] >= 0
        assert set(ratio) == {"cas_ops_per_s", "cas_p50", "cas_p99"}
        assert all(isinstance(v, float) and v > 0 for v in ratio.values())
        assert len(rounds) == TINY["rounds"]
        assert all(isinstance(v, float) and v > 0 for v in rounds)
        assert min(rounds) <= median <= max(rounds)
    else:
        assert r["floor"] is None and r["ratio"] is None
    assert [e["length"] for e in r["lengths"]] == list(TINY["lengths"])
    for entry in r["lengths"]:
        assert entry["build_seconds"] >= 0
        check_summary(entry["append"], 1)
        check_summary(entry["read"], 1)
    cap = r["capacity"]
    assert cap["p99_ms_threshold"] == 100.0
    assert [s["k"] for s in cap["steps"]][:1] == [TINY["capacity_start"]]
    for step in cap["steps"]:
        assert step["errors"] == 0
        assert step["beats"] > 0 and step["beats_expected"] > 0
        assert isinstance(step["ok"], bool)
    assert 0 <= cap["max_k"] <= TINY["capacity_max"]
    assert cap["stopped_by"] in {"converged", "time budget", "capacity_max reached"}
    json.dumps(r)  # JSON-safe throughout


async def test_memory_run_has_every_section() -> None:
    cfg = BenchConfig(url=f"memory://bench-{uuid.uuid4().hex}", **TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        result = await run_bench(cfg)
    check_result(result, "memory", expect_floor=True)
    assert result["floor"]["name"] == MemoryFloor.name
    text = render(result)
    for label in (
        "cas (raw floor)",
        "CAS adapter/floor",
        "Heartbeat capacity",
        "transcript length",
    ):
        assert label in text


def test_cli_json_on_the_default_file_backend(tmp_path: Path) -> None:
    info = get_registry().by_scheme("file")
    if info is None:
        pytest.skip("the file backend (agentstores-file) is not installed or failed to load")
    args = ["bench", "--json", "--quiet", "--clients", "2", "--seconds", "0.2"]
    args += ["--warmup", "0.05", "--rounds", "2", "--lengths", "3,25", "--capacity"]
    args += ["--capacity-window", "1", "--capacity-budget", "10"]
    args += ["--capacity-start", "2", "--capacity-max", "4", "--capacity-gc-freeze"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTORES_")}
    env["TMPDIR"] = str(tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from agentstores.cli import main; raise SystemExit(main({args!r}))",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["runs"]) == 1
    run = data["runs"][0]
    assert run["url"].startswith("file://") and run["temporary_store"] is True
    check_result(run, "file", expect_floor=True)
    assert run["capacity"]["gc_freeze"] is True
    assert list(tmp_path.iterdir()) == []  # the temporary store is removed


async def test_capacity_with_the_collector_frozen_thaws_it_after_each_step() -> None:
    cfg = BenchConfig(
        url=f"memory://bench-{uuid.uuid4().hex}", **{**TINY, "capacity_gc_freeze": True}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        result = await run_bench(cfg)
    assert result["capacity"]["gc_freeze"] is True and result["capacity"]["steps"]
    assert gc.get_freeze_count() == 0


def test_cli_reports_usage_errors() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agentstores.cli import main; "
            "raise SystemExit(main(['bench', '--url', 'memory://x', '--ops', 'nope']))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "unknown operations" in out.stderr


@pytest.mark.parametrize(
    "bad",
    [
        {"clients": 0},
        {"seconds": 0},
        {"rounds": 0},
        {"ops": ("cas", "teleport")},
        {"lengths": (0,)},
        {"capacity_start": 10, "capacity_max": 5},
    ],
)
def test_config_validation(bad: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        BenchConfig(**bad).validate()


def test_percentiles_are_nearest_rank() -> None:
    data = sorted(n * 1_000_000 for n in range(1, 101))  # 1..100 ms
    assert percentile(data, 50) == 50.0 and percentile(data, 99) == 99.0
    assert percentile(data, 100) == 100.0 and percentile([7_000_000], 99) == 7.0
    assert math.isnan(percentile([], 50))
    s = Sample([2_000_000, 1_000_000], elapsed_ns=1_000_000_000)
    summary = s.summary(clients=1)
    assert summary["ops_per_s"] == 2.0 and summary["p50_ms"] == 1.0 and "note" in summary


async def test_memory_floor_keeps_the_protocol() -> None:
    floor: RawFloor = MemoryFloor()
    await floor.setup("memory://", 2)
    assert await floor.cas(0, 0) and await floor.cas(0, 1)
    assert not await floor.cas(0, 1)  # the stored value is 2 now
    assert await floor.cas(1, 0)
    await floor.close()


def test_run_all_driver_benches_the_file_backend(capsys: pytest.CaptureFixture[str]) -> None:
    if get_registry().by_scheme("file") is None:
        pytest.skip("the file backend (agentstores-file) is not installed or failed to load")
    from tests.bench.run_all import main as run_all

    args = ["--only", "file", "--json", "--quiet", "--clients", "2", "--seconds", "0.1"]
    args += ["--warmup", "0.02", "--lengths", "none", "--ops", "cas,read"]
    assert run_all(args) == 0
    data = json.loads(capsys.readouterr().out)
    (run,) = data["runs"]
    assert run["backend"] == "file" and set(run["operations"]) == {"cas", "read"}
    assert run["lengths"] == [] and run["capacity"] is None


async def test_a_cas_takes_its_staged_row_only_for_the_next_epoch() -> None:
    """Rows are built before a window for the epochs ahead; a client whose epoch moved
    on without them (a row taken by a call that then failed) builds its own instead of
    writing a stale one."""
    import random

    from agentstores.memory.stores import MemoryStores
    from agentstores_tools.bench.harness import (
        STAGED_ROWS,
        _Client,
        _op_cas,
        _prepare,
        _stage_cas_rows,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        stores = MemoryStores(f"memory://staged-{uuid.uuid4().hex}")
        await stores.open()
    client = _Client(0, stores, "t", "me", random.Random(0))
    await _prepare(client, ("cas",))
    _stage_cas_rows([client])
    assert [r.epoch for r in list(client.cas_rows)[:3]] == [2, 3, 4]
    await _op_cas(client)
    assert client.cas_epoch == 2 and len(client.cas_rows) == STAGED_ROWS - 1
    client.cas_rows.popleft()  # taken by a call that failed: epoch 3 was never written
    await _op_cas(client)
    assert client.cas_epoch == 3
    view = await stores.supervision.read(client.key("cas"), "me")
    assert view.row is not None and view.row.epoch == 3
    await stores.close()
