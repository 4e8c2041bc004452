"""``agentstores check``: progress lines, the table, JSON, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert run.returncode == 2 and "cannot make a backend" in run.stderr
    assert run.stdout == "", "a run that cannot start prints its one line, nothing else"


@pytest.mark.parametrize(
    ("scheme", "distribution"), [("mongodb", "agentstores-mongo"), ("s3", "agentstores-s3")]
)
def test_an_unknown_scheme_names_the_distribution_to_install(
    scheme: str, distribution: str
) -> None:
    run = check(f"{scheme}://somewhere/db")
    assert run.returncode == 2
    assert f"pip install {distribution}" in run.stderr, run.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("tests.catalogue.mutants:cas_creates_from_epoch",), "is not a backend URL"),
        (("nothing",), "is not a backend URL"),
        ((), "give a backend URL"),
        (("memory://", "--factory", "agentstores.memory.stores:MemoryStores"), "not both"),
        (("--factory", "memory://x"), "--factory takes module:callable"),
    ],
    ids=["spec-as-url", "bare-word", "neither", "both", "url-as-factory"],
)
def test_a_target_that_is_not_one_url_or_one_factory_exits_two(
    args: tuple[str, ...], says: str
) -> None:
    run = check(*args)
    assert run.returncode == 2 and says in run.stderr, run.stderr
    if "not both" not in says and "takes" not in says:
        assert "--factory module:callable" in run.stderr, "the message names both forms"
    assert run.stdout == "" and len(run.stderr.splitlines()) == 1, run.stderr


def test_factory_flag_checks_the_backend_a_callable_makes() -> None:
    run = check(
        "--factory",
        "tests.catalogue.mutants:reference_backend",
        "--profile",
        "quick",
        "--promise",
        "state.*",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "checking tests.catalogue.mutants:reference_backend" in run.stdout
    assert "passed, 0 failed" in run.stdout


def test_an_unknown_url_option_is_refused_before_anything_runs() -> None:
    run = check("memory://x?pool_size=2", "--profile", "quick")
    assert run.returncode == 2
    assert "unknown memory URL option 'pool_size'; known: none" in run.stderr
    assert run.stdout == ""


def test_without_the_suite_installed_says_so() -> None:
    run = check("memory://", pre="import sys\nsys.modules['agentstores_contract'] = None")
    assert run.returncode == 2
    assert "pip install agentstores-contract" in run.stderr


def test_an_unreachable_backend_could_not_run_and_says_so_once(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    run = check(f"file://{blocker}/store", "--profile", "quick")
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == "", "no header, no table: nothing ran"
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "cannot reach" in lines[0] and "Not a directory" in lines[0]


def test_the_filesystem_root_is_refused() -> None:
    run = check("file:///", "--profile", "quick")
    assert run.returncode == 2 and "names the filesystem root" in run.stderr
    assert run.stdout == ""


def test_the_table_never_loses_a_failure_reason() -> None:
    from agentstores_contract.validation import FAILED, PASSED, PromiseResult, Report

    reason = "assert " + " ".join(f"word{i}" for i in range(80)) + " THE-END"
    report = Report(
        "memory://",
        "quick",
        [
            PromiseResult("state.model", FAILED, reason, ["t1"], 0.1),
            PromiseResult("state.save", FAILED, "short reason", ["t2"], 0.1),
            PromiseResult("keys.validation", PASSED, "", ["t3"], 0.1),
        ],
        [],
        1.0,
    )
    table = report.table(width=100)
    assert all(len(line) <= 100 for line in table.splitlines()), table
    shown = " ".join(table.split("failures shortened above, in full:", 1)[1].split())
    assert reason in shown, "the cut reason follows the table in full"
    assert "short reason" in table and "short reason" not in shown, "one that fits is not repeated"
