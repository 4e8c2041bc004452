"""The follow benchmark runs end to end on memory:// and file:// with tiny counts.

Shape and sanity only (every write reaches every follower of its conversation, a mode a
backend cannot run says why, the report renders); nothing here asserts a speed.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from agentstores.cli import main as cli_main
from agentstores.errors import UsageError
from agentstores.memory.stores import EphemeralStoreWarning
from agentstores_tools.bench.follow import (
    FollowConfig,
    Unavailable,
    _Follower,
    latencies,
    mode_url,
    parse_shape,
    run_follow,
    with_push,
)
from agentstores_tools.bench.follow_report import markdown
from agentstores_tools.bench.harness import BenchConfig, run_bench

TINY = FollowConfig(shapes=((1, 1), (2, 1)), seconds=0.3, interval=0.1, idle=0.2)


def _measured(row: dict[str, Any]) -> None:
    """A measured row: every write logged and yielded to each follower of its conversation."""
    assert "unavailable" not in row, row
    assert row["errors"] == 0, row.get("first_error")
    per_conversation = row["followers"] // row["conversations"]
    assert row["samples"] == row["writes"] * per_conversation
    assert row["issue_p50_ms"] <= row["issue_p99_ms"] <= row["issue_max_ms"]
    assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
    assert row["issue_p50_ms"] > 0
    assert row["idle_reads_per_follower_s"] >= 0 and row["cpu_percent"] >= 0


async def test_memory_measures_local_only_and_says_why_not_the_rest() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        result = await run_follow("memory://follow-test", "t-follow", TINY, lambda _: None)
    rows = result["rows"]
    assert [(r["mode"], r["followers"], r["conversations"]) for r in rows] == [
        (mode, f, c) for mode in ("local", "push", "poll") for f, c in TINY.shapes
    ]
    for row in rows:
        if row["mode"] == "local":
            _measured(row)
        else:
            assert "never leave the process" in row["unavailable"]


async def test_file_pushes_and_polls_a_producer_in_another_process(tmp_path: Path) -> None:
    """push and poll: the producers run in a process of their own, heard through the file
    backend's change check (push=true) or only by the poll (push=false)."""
    cfg = FollowConfig(modes=("push", "poll"), shapes=((2, 2),), seconds=0.4, idle=0.4)
    result = await run_follow(f"file://{tmp_path}", "t-follow", cfg, lambda _: None)
    push, poll = result["rows"]
    _measured(push)
    _measured(poll)
    # another process's writes arrive only by the poll: an idle follower reads
    assert poll["idle_reads_per_follower_s"] > 0


def test_latency_is_to_the_first_yield_holding_the_write() -> None:
    # conversation 0 wrote indexes 10, 20, 30; its follower yielded 20 (holding 10 and
    # 20) then never 30; conversation 1's follower yielded its only write
    writes = [(0, 10, 100, 110), (0, 20, 200, 210), (0, 30, 300, 310), (1, 5, 50, 60)]
    followers = [_Follower(0, [(20, 250)]), _Follower(1, [(5, 65)])]
    from_return, from_issue, missed = latencies(writes, followers)
    assert sorted(from_return) == [5, 40, 140]
    assert sorted(from_issue) == [15, 50, 150]
    assert missed == 1


def test_shapes_urls_and_config_are_checked() -> None:
    assert parse_shape("1000") == (1000, 1000)
    assert parse_shape("1_000x1") == (1000, 1)
    for bad in ("x", "0", "10x0", "ten"):
        with pytest.raises(UsageError):
            parse_shape(bad)
    with pytest.raises(UsageError, match="multiple"):
        FollowConfig(shapes=((3, 2),)).validate()
    with pytest.raises(UsageError, match="unknown follow modes"):
        FollowConfig(modes=("fast",)).validate()
    with pytest.raises(UsageError, match="idle"):
        FollowConfig(idle=0).validate()
    url = "postgresql://u@h/db?schema=s&push=false"
    assert with_push(url, True) == "postgresql://u@h/db?schema=s&push=true"
    assert mode_url("memory://x", "local") == "memory://x"
    # a backend with no push option: push is not measured, with its refusal; poll is as given
    refused = mode_url("template://x", "push")
    assert isinstance(refused, Unavailable) and "no push option" in refused.reason
    assert mode_url("template://x", "poll") == "template://x"
    # many conversations write less often each, under the rate
    assert FollowConfig(interval=0.1, rate=500, seconds=10).pace(1000) == (2.0, 5)


async def test_bench_report_and_page_hold_the_follow_table() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        cfg = BenchConfig(
            url="memory://follow-report",
            clients=1,
            ops=(),
            lengths=(),
            follow=FollowConfig(modes=("local", "push"), shapes=((1, 1),), seconds=0.2, idle=0.1),
        )
        result = await run_bench(cfg)
    page = markdown([result], "the command")
    assert "| local | 1 | 1 |" in page
    assert "push: not measured" in page and "`the command`" in page


def test_cli_takes_the_follow_options(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--url", "memory://follow-cli", "--ops", "none", "--lengths", "none"]
    argv += ["--clients", "1", "--quiet", "--follow", "--follow-modes", "local"]
    argv += ["--follow-shapes", "2x1", "--follow-seconds", "0.2", "--follow-idle", "0.1"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "Follow latency" in out
    assert any(line.split()[:3] == ["local", "2", "1"] for line in out.splitlines())
