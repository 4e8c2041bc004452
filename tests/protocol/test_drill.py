"""The kill-and-resume drill end to end: real worker processes on the file backend."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentstores.cli import main as cli_main
from agentstores.errors import UsageError
from agentstores_tools.drill import Timings, render, run_drill

pytest.importorskip("agentstores_file.stores", reason="the file backend is not installed")

ROOT = Path(__file__).resolve().parents[2]


async def test_drill_passes_on_the_file_backend():
    lines: list[str] = []
    result = await run_drill(timings=Timings.fast(), say=lines.append)
    summary = render(result)
    assert result.passed, "\n".join(lines) + summary
    kill, pause = result.rounds
    for r in (kill, pause):
        assert r.takeover_epoch == r.first_epoch + 1
        assert r.checkpoint_chars <= r.recording_at_takeover
        assert r.recording_consistent
        assert r.follower["rollbacks"] == 0 and r.follower["divergences"] == 0
        assert r.follower["final_matches"] is True
        assert r.follower["epochs"] == [r.first_epoch, r.takeover_epoch]
        assert r.heartbeat_age_at_detection is not None
        assert r.heartbeat_age_at_detection > result.timings.dead_after
    assert kill.stale_writes is None
    assert pause.stale_writes is not None
    assert pause.stale_writes["attempted"] == len(pause.stale_writes["refused"]) > 0
    assert pause.stale_writes["landed"] == []
    assert "verdict: PASS" in summary


async def test_drill_fails_a_backend_that_lets_a_fenced_checkpoint_land(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = await run_drill(
        timings=Timings.fast(),
        rounds=("pause",),
        say=lambda _: None,
        factory="tests.protocol.broken_file:unfenced_state",
    )
    assert not result.passed
    (only,) = result.rounds
    assert only.stale_writes is not None
    assert [w for w in only.stale_writes["landed"] if w.startswith("state.save")], only
    assert any("stale write landed: state.save" in p for p in only.problems)
    assert "verdict: FAIL" in render(result)


async def test_drill_refuses_memory():
    with pytest.raises(UsageError, match="shares nothing across processes"):
        await run_drill("memory://anything", say=lambda _: None)


def test_cli_exit_codes(tmp_path, capsys):
    assert cli_main(["drill", "memory://x"]) == 2
    assert "memory://" in capsys.readouterr().err
    assert cli_main(["drill", "--rounds", "nap"]) == 2
    out = tmp_path / "result.json"
    code = cli_main(["drill", "--fast", "--rounds", "kill", "--json", str(out)])
    assert code == 0, capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["passed"] is True and [r["mode"] for r in data["rounds"]] == ["kill"]
