"""``agentstores check``: progress lines, the table, JSON, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def check(*args: str, pre: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{pre}\nimport sys\nfrom agentstores.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "check", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_passing_backend_prints_a_line_per_promise_and_a_table() -> None:
    run = check("memory://", "--profile", "quick", "--promise", "state.*", "--promise", "clock.*")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    progress = [line for line in lines if line.startswith("[")]
    assert len(progress) == 5 and all("PASSED" in line for line in progress), run.stdout
    assert "5 passed, 0 failed, 0 skipped of 5 promises" in run.stdout


def test_json_for_machines() -> None:
    run = check("memory://", "--json", "--profile", "quick", "--promise", "multiprocess.*")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["ok"] is True
    assert {p["outcome"] for p in report["promises"]} == {"skipped"}
    assert all("multi_process" in p["reason"] for p in report["promises"])


def test_failing_backend_exits_one_naming_the_promise() -> None:
    run = check(
        "memory://",
        "--profile",
        "quick",
        "--promise",
        "conversations.truncate",
        "--seed",
        "31",
        pre="import tests.catalogue.mutants as m, agentstores.memory.stores as s\n"
        "s.MemoryStores.__init__ = (lambda init: lambda self, *a, **k: (init(self, *a, **k), "
        "setattr(self, 'conversations', m.TruncateKeepsUserMessage(self.data)))[0])"
        "(s.MemoryStores.__init__)",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED  conversations.truncate" in run.stdout
    assert "(profile quick, seed 31)" in run.stdout
    replay = (
        "agentstores check memory:// --profile quick --seed 31 --promise conversations.truncate"
    )
    assert replay in run.stdout, "a failure prints the command that replays it"


def test_unknown_profile_and_unknown_backend_exit_two() -> None:
    assert check("memory://", "--profile", "nope").returncode == 2
    assert check("memory://", "--seed", "-3").returncode == 2
    run = check("nosuchscheme://x")
    assert run.returncode == 2 and "cannot make a backend" in run.stdout


def test_without_the_suite_installed_says_so() -> None:
    run = check("memory://", pre="import sys\nsys.modules['agentstores_contract'] = None")
    assert run.returncode == 2
    assert "pip install agentstores-contract" in run.stderr


def test_an_unreachable_backend_could_not_run_and_says_so_once(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    run = check(f"file://{blocker}/store", "--profile", "quick")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "cannot reach" in run.stdout + run.stderr
    assert "PASSED" not in run.stdout and "FAILED" not in run.stdout  # no promise ran
