"""The suite's own plumbing: promise tags, the pytest plugin, validate() and its Report."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentstores.errors import UsageError
from agentstores_contract import PROMISES, BackendUnderTest, ContractSuite, Report, validate
from agentstores_contract.validation import FAILED, PASSED, SKIPPED

ROOT = Path(__file__).resolve().parents[2]


def promises_by_test() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name in dir(ContractSuite):
        if not name.startswith("test_"):
            continue
        marks = getattr(getattr(ContractSuite, name), "pytestmark", [])
        names = [m.args[0] for m in marks if m.name == "promise"]
        for m in marks:
            if m.name == "parametrize":
                for param in m.args[1]:
                    names += [
                        pm.args[0] for pm in getattr(param, "marks", ()) if pm.name == "promise"
                    ]
        found[name] = names
    return found


def test_every_test_names_known_promises() -> None:
    for test, names in promises_by_test().items():
        assert names, f"{test} carries no promise marker"
        assert all(n in PROMISES for n in names), f"{test}: unknown promise in {names}"


def test_every_promise_has_a_test() -> None:
    tagged = {n for names in promises_by_test().values() for n in names}
    assert set(PROMISES) <= tagged, f"promises without a test: {sorted(set(PROMISES) - tagged)}"


def pytest_in(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plugin_is_inert_without_options(tmp_path: Path) -> None:
    run = pytest_in(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout, run.stdout
    assert "agentstores contract:" not in run.stdout and "_run.py" not in run.stdout


def test_plugin_runs_the_suite_for_a_url(tmp_path: Path) -> None:
    run = pytest_in(
        tmp_path,
        "--agentstores-url",
        f"memory://{uuid.uuid4().hex}",
        "--agentstores-promise",
        "keys.*",
        "--agentstores-profile",
        "quick",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    keyed = _key_tests()
    assert f"{keyed} passed" in run.stdout, (
        f"without test paths, the suite's {keyed} key tests run alone"
    )


def _key_tests() -> int:
    """How many test functions of the contract suite carry a ``keys.*`` promise (a
    parametrized one would run more than once: the count above would then say so)."""
    from agentstores_contract import ContractSuite

    count = 0
    for name in dir(ContractSuite):
        marks = getattr(getattr(ContractSuite, name), "pytestmark", [])
        if name.startswith("test_") and any(
            m.name == "promise" and m.args[0].startswith("keys.") for m in marks
        ):
            count += 1
    return count


def test_plugin_reports_a_broken_factory(tmp_path: Path) -> None:
    run = pytest_in(
        tmp_path,
        "--agentstores-factory",
        "tests.catalogue.mutants:cas_creates_from_epoch",
        "--agentstores-promise",
        "supervision.cas.create",
        "test_plain.py",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "agentstores contract: tests.catalogue.mutants:cas_creates_from_epoch" in run.stdout
    assert "1 failed, 1 passed" in run.stdout, "with a test path, the suite runs beside it"
    assert "must not create a missing row" in run.stdout


SECRET = "hunter2-very-secret"
TRUNCATE_BREAKS = """
import agentstores.memory.stores as s
import tests.catalogue.mutants as m

_init = s.MemoryStores.__init__


def _broken(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.conversations = m.TruncateKeepsUserMessage(self.data)


s.MemoryStores.__init__ = _broken
"""
"""A conftest making every memory:// bundle keep the user message it truncates at."""


def test_plugin_masks_a_password_in_the_url(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(TRUNCATE_BREAKS)
    url = f"memory://someone:{SECRET}@pw-{uuid.uuid4().hex}"
    run = pytest_in(
        tmp_path,
        "--agentstores-url",
        url,
        "--agentstores-promise",
        "conversations.truncate",
        "--agentstores-profile",
        "quick",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "agentstores contract: memory://someone:***@pw-" in run.stdout, "the header, masked"
    assert "--agentstores-url 'memory://someone:***@pw-" in run.stdout, "the replay, masked"
    assert SECRET not in run.stdout + run.stderr


def test_a_backend_shows_its_url_without_the_password() -> None:
    backend = BackendUnderTest.from_url(f"memory://someone:{SECRET}@shown")
    assert backend.label == "memory://someone:***@shown"
    assert SECRET not in repr(backend) and "memory://someone:***@shown" in repr(backend)
    assert backend.url == f"memory://someone:{SECRET}@shown", "the URL itself stays usable"


def test_worker_processes_never_carry_the_url_on_their_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any local user can read a process's command line; the URL goes through stdin."""
    from agentstores.keys import ConversationKey
    from agentstores_contract import multiprocess

    started: list[list[str]] = []
    popen = subprocess.Popen

    def recording(args: list[str], *rest: Any, **options: Any) -> Any:
        started.append(list(args))
        return popen(args, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", recording)
    url = f"memory://someone:{SECRET}@workers-{uuid.uuid4().hex}"
    key = ConversationKey("tenant", "session")
    assert multiprocess.race_processes(url, "write", key, 2, 1) == [["w0"], ["w1"]]
    assert len(started) == 2 and all(SECRET not in " ".join(args) for args in started)


def test_validate_reports_per_promise() -> None:
    seen: list[str] = []
    report = validate(
        f"memory://{uuid.uuid4().hex}",
        profile="quick",
        promises=["keys.*", "multiprocess.*"],
        on_result=lambda r: seen.append(r.name),
    )
    assert report.error is None and report.ok, report.table()
    by_name = report.by_name()
    assert by_name["keys.validation"].outcome == PASSED
    assert by_name["multiprocess.supervision.cas"].outcome == SKIPPED
    assert "multi_process" in by_name["multiprocess.supervision.cas"].reason
    assert sorted(seen) == sorted(by_name), "on_result is called once per promise"
    assert Report.from_dict(report.to_dict()).to_dict() == report.to_dict()
    assert "keys.isolation" in report.table()


def test_validate_takes_a_callable_and_names_the_broken_promise() -> None:
    from tests.catalogue.mutants import cas_creates_from_epoch

    report = validate(cas_creates_from_epoch, profile="quick", promises=["supervision.cas.*"])
    assert not report.ok
    by_name = report.by_name()
    assert by_name["supervision.cas.create"].outcome == FAILED
    assert "must not create a missing row" in by_name["supervision.cas.create"].reason
    assert by_name["supervision.cas.race"].outcome == PASSED


@pytest.mark.parametrize(
    ("target", "factory", "says"),
    [
        (None, "agentstores_contract.backend:no_such_factory", "no_such_factory"),
        (None, "memory://x", "expected a factory as module:callable"),
        ("nosuchscheme://x", None, "no installed backend handles nosuchscheme://"),
        ("tests.catalogue.mutants:cas_creates_from_epoch", None, "expected a backend URL"),
        (lambda: 42, None, "not a backend or Stores"),
    ],
    ids=["missing-factory", "url-as-factory", "unknown-scheme", "spec-as-url", "not-a-backend"],
)
def test_validate_reports_a_run_that_cannot_start(target: Any, factory: Any, says: str) -> None:
    report = validate(target, factory=factory, promises=["keys.*"])
    assert report.error is not None and not report.ok
    assert report.promises == [] and "cannot make a backend" in report.error
    assert says in report.error


def test_validate_takes_a_target_or_a_factory() -> None:
    with pytest.raises(UsageError, match="not both"):
        validate()
    with pytest.raises(UsageError, match="not both"):
        validate("memory://", factory="tests.catalogue.mutants:cas_creates_from_epoch")


@pytest.mark.parametrize("profile", ["quick", "ci", "deep"])
def test_profiles_scale_up(profile: str) -> None:
    from agentstores_contract.profiles import PROFILES

    assert PROFILES[profile].hypothesis().max_examples == PROFILES[profile].examples
    assert PROFILES["deep"].examples >= 10 * PROFILES["ci"].examples / 2
