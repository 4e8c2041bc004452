"""``agentstores check``: progress lines, the table, JSON, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def check(
    *args: str, pre: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    code = f"{pre}\nimport sys\nfrom agentstores.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "check", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


TRUNCATE_BREAKS = (
    "import tests.catalogue.mutants as m, agentstores.memory.stores as s\n"
    "s.MemoryStores.__init__ = (lambda init: lambda self, *a, **k: (init(self, *a, **k), "
    "setattr(self, 'conversations', m.TruncateKeepsUserMessage(self.data)))[0])"
    "(s.MemoryStores.__init__)"
)
"""Makes every memory:// bundle of the process keep the user message it truncates at."""


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
        pre=TRUNCATE_BREAKS,
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


@pytest.mark.parametrize("args", [("memory://",), ("--json", "memory://", "--seed", "3")])
def test_without_the_suite_installed_says_what_to_install(args: tuple[str, ...]) -> None:
    """The suite adds ``check`` through its entry point; without it, core's stand-in
    takes whatever follows and names the distribution, in one line."""
    run = check(*args, env={"AGENTSTORES_DISABLE_PLUGINS": "contract"})
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == "" and len(run.stderr.splitlines()) == 1, run.stderr
    assert "pip install agentstores-contract" in run.stderr


def test_the_suite_adds_check_through_its_one_entry_point() -> None:
    from importlib.metadata import entry_points

    points = [ep for ep in entry_points(group="agentstores") if ep.dist is not None]
    ours = [ep for ep in points if ep.dist.name == "agentstores-contract"]  # type: ignore[union-attr]
    assert [(ep.name, ep.value) for ep in ours] == [("contract", "agentstores_contract.plugin")]
    from agentstores.cli import SUBCOMMANDS

    assert "check" not in SUBCOMMANDS, "core carries no check command of its own"


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


WHY = "keeps the user message it truncates at"
TRUNCATE_MUTANT = ("--factory", "tests.catalogue.mutants:truncate_keeps_user_message")
TRUNCATE_ONLY = ("--profile", "quick", "--promise", "conversations.truncate")


def test_a_waived_promise_is_reported_waived_and_exits_one() -> None:
    run = check(*TRUNCATE_MUTANT, *TRUNCATE_ONLY, "--waive", f"conversations.truncate={WHY}")
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"WAIVED  conversations.truncate  {WHY}" in run.stdout, run.stdout
    assert "0 passed, 0 failed, 1 waived, 0 skipped of 1 promises" in run.stdout
    assert "--accept-waivers" in run.stdout, "the output says how to accept them"


def test_accepted_waivers_exit_zero_and_json_says_waived() -> None:
    waive = ("--waive", f"conversations.truncate={WHY}", "--accept-waivers")
    assert check(*TRUNCATE_MUTANT, *TRUNCATE_ONLY, *waive).returncode == 0
    run = check(*TRUNCATE_MUTANT, *TRUNCATE_ONLY, *waive, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["ok"] is False and report["ok_with_waivers"] is True
    assert [(p["name"], p["outcome"], p["reason"]) for p in report["promises"]] == [
        ("conversations.truncate", "waived", WHY)
    ]
    assert report["waivers"] == {"conversations.truncate": WHY}


def test_a_waiver_no_test_needs_fails_even_when_accepted() -> None:
    run = check(
        "memory://",
        "--profile",
        "quick",
        "--promise",
        "state.model",
        "--waive",
        "state.model=unsure",
        "--accept-waivers",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED  state.model" in run.stdout and "is not needed" in run.stdout
    assert "replay a failure" not in run.stdout


@pytest.mark.parametrize(
    ("waiver", "says"),
    [
        ("conversations.truncate", "a waiver is PROMISE=REASON"),
        ("conversations.truncate=", "a waiver is PROMISE=REASON"),
        ("=because", "a waiver is PROMISE=REASON"),
        ("conversations.truncat=x", "did you mean 'conversations.truncate'"),
    ],
    ids=["no-reason", "empty-reason", "no-name", "unknown"],
)
def test_a_bad_waiver_exits_two_in_one_line(waiver: str, says: str) -> None:
    run = check("memory://", "--profile", "quick", "--waive", waiver)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == "" and len(run.stderr.splitlines()) == 1, run.stderr
    assert says in run.stderr


SECRET = "hunter2-very-secret"


def test_a_password_in_the_url_never_reaches_the_output() -> None:
    url = f"memory://someone:{SECRET}@pw-{uuid.uuid4().hex}"
    promise = ("--profile", "quick", "--promise", "conversations.truncate", "--seed", "5")
    text = check(url, *promise, pre=TRUNCATE_BREAKS)
    assert text.returncode == 1, text.stdout + text.stderr
    assert "checking memory://someone:***@pw-" in text.stdout
    assert "agentstores check 'memory://someone:***@pw-" in text.stdout, "the replay, masked"
    as_json = check(url, *promise, "--json", pre=TRUNCATE_BREAKS)
    assert as_json.returncode == 1, as_json.stderr
    assert json.loads(as_json.stdout)["backend"].startswith("memory://someone:***@pw-")
    refused = check(f"memory://someone:{SECRET}@x?pool_size=2")
    assert refused.returncode == 2 and "memory://someone:***@x" in refused.stderr
    for run in (text, as_json, refused):
        assert SECRET not in run.stdout + run.stderr


def test_python_m_runs_the_same_command() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentstores_contract",
            "memory://",
            "--profile",
            "quick",
            "--promise",
            "clock.*",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr
    assert {p["outcome"] for p in json.loads(run.stdout)["promises"]} == {"passed"}
