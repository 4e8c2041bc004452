"""Waivers: a backend names a promise it does not keep and why; its tests still run, it
is reported waived (never passed), and a waiver none of its tests needs fails."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentstores.errors import UsageError
from agentstores.memory.stores import MemoryStores
from agentstores_contract import BackendUnderTest, Report, validate
from agentstores_contract.validation import FAILED, PASSED, WAIVED
from tests.catalogue.mutants import reference_backend, truncate_keeps_user_message

ROOT = Path(__file__).resolve().parents[2]
WHY = "keeps the user message it truncates at (ticket 7)"


@pytest.mark.parametrize(
    ("waive", "says"),
    [
        ({"conversations.truncat": WHY}, "did you mean 'conversations.truncate'"),
        ({"no.such.promise": WHY}, "no promise has that name"),
        ({"conversations.truncate": ""}, "needs a reason"),
        ({"conversations.truncate": "   "}, "needs a reason"),
        ({"conversations.truncate": None}, "needs a reason"),
        ([("conversations.truncate", WHY)], "takes a mapping"),
    ],
    ids=["typo", "unknown", "empty", "blank", "none", "not-a-mapping"],
)
def test_a_waiver_names_a_promise_and_gives_a_reason(waive: Any, says: str) -> None:
    opened: list[str] = []

    def open_() -> MemoryStores:
        opened.append("opened")
        return MemoryStores(f"memory://{uuid.uuid4().hex}")

    with pytest.raises(UsageError, match=re.escape(says)):
        BackendUnderTest(open=open_, waive=waive)
    assert opened == [], "a bad waiver is refused before anything opens"
    with pytest.raises(UsageError, match=re.escape(says)):
        BackendUnderTest.from_url("memory://", waive=waive)


def test_a_waiver_is_kept_with_its_reason() -> None:
    backend = BackendUnderTest.from_url("memory://", waive={"conversations.truncate": f" {WHY} "})
    assert backend.waive == {"conversations.truncate": WHY}
    assert BackendUnderTest.from_url("memory://").waive == {}


def test_validate_reports_a_waived_promise_as_waived() -> None:
    """conversations.truncate has six tests; the mutant breaks some: they are expected
    failures, the others pass, and the promise is waived, not passed."""
    report = validate(
        truncate_keeps_user_message,
        profile="quick",
        promises=["conversations.truncate", "state.*"],
        waive={"conversations.truncate": WHY},
    )
    result = report.by_name()["conversations.truncate"]
    assert result.outcome == WAIVED and result.reason == WHY, report.table()
    tests = [t for t in report.tests if "conversations.truncate" in t.promises]
    assert {t.outcome for t in tests} == {WAIVED, PASSED}, "some tests fail, some pass"
    assert report.by_name()["state.model"].outcome == PASSED
    assert not report.ok and report.ok_with_waivers
    assert report.waived == [result] and result not in report.passed
    assert report.waivers == {"conversations.truncate": WHY}
    assert report.replays == {}, "a waived promise has nothing to replay"
    assert "1 waived" in report.summary()
    assert re.search(rf"conversations\.truncate +WAIVED +6 +{re.escape(WHY)}", report.table())
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["ok_with_waivers"] is True
    assert data["waivers"] == {"conversations.truncate": WHY}
    outcomes = {p["name"]: p["outcome"] for p in data["promises"]}
    assert outcomes["conversations.truncate"] == "waived"
    assert Report.from_dict(data).to_dict() == report.to_dict()


def test_a_waiver_none_of_its_tests_needs_fails() -> None:
    report = validate(
        reference_backend,
        profile="quick",
        promises=["state.model"],
        waive={"state.model": "we were not sure"},
    )
    result = report.by_name()["state.model"]
    assert result.outcome == FAILED, report.table()
    assert "the waiver of 'state.model' (we were not sure) is not needed" in result.reason
    assert "in teardown" not in result.reason
    assert not report.ok and not report.ok_with_waivers
    assert report.replays == {}, "nothing to replay: remove the waiver"


def test_a_waiver_given_to_validate_joins_the_backends_own() -> None:
    needless = "not needed, so it fails"
    backend = dataclasses.replace(truncate_keeps_user_message(), waive={"state.model": needless})
    report = validate(
        backend,
        profile="quick",
        promises=["conversations.truncate", "state.model"],
        waive={"conversations.truncate": WHY},
    )
    assert report.waivers == {"state.model": needless, "conversations.truncate": WHY}
    assert report.by_name()["conversations.truncate"].outcome == WAIVED
    assert report.by_name()["state.model"].outcome == FAILED
    assert backend.waive == {"state.model": needless}, "the caller's backend is left as it was"


def test_validate_refuses_a_bad_waiver() -> None:
    with pytest.raises(UsageError, match="no promise has that name"):
        validate("memory://", waive={"nope": WHY})


def pytest_in(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rxXE", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


MUTANT = ("--agentstores-factory", "tests.catalogue.mutants:truncate_keeps_user_message")
QUICK = ("--agentstores-profile", "quick")


def test_in_pytest_a_waived_test_is_an_expected_failure_never_a_pass(tmp_path: Path) -> None:
    run = pytest_in(
        tmp_path,
        *MUTANT,
        *QUICK,
        "--agentstores-promise",
        "conversations.truncate",
        "--agentstores-waive",
        f"conversations.truncate={WHY}",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"\d+ xfailed, \d+ xpassed", run.stdout), run.stdout
    assert not re.search(r"\b\d+ passed", run.stdout), "nothing of a waived promise passes"
    assert f"waived: {WHY}" in run.stdout


def test_in_pytest_a_needless_waiver_fails_the_run(tmp_path: Path) -> None:
    run = pytest_in(
        tmp_path,
        *MUTANT,
        *QUICK,
        "--agentstores-promise",
        "state.model",
        "--agentstores-waive",
        "state.model=just in case",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(r"\b1 xpassed, (\d+ warnings?, )?1 error\b", run.stdout), run.stdout
    assert "the waiver of 'state.model' (just in case) is not needed" in run.stdout


@pytest.mark.parametrize(
    ("waiver", "says"),
    [("state.model", "PROMISE=REASON"), ("state.mode=x", "did you mean 'state.model'")],
    ids=["no-reason", "unknown"],
)
def test_in_pytest_a_bad_waiver_is_a_usage_error(tmp_path: Path, waiver: str, says: str) -> None:
    run = pytest_in(tmp_path, *MUTANT, "--agentstores-waive", waiver)
    assert run.returncode == 4, run.stdout + run.stderr
    assert says in run.stderr, run.stderr


TWO_PROMISES = """
import pytest
from agentstores_contract import BackendUnderTest, ContractBase
from agentstores_contract.promises import promise


class TestTwoPromises(ContractBase):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls):
        return BackendUnderTest.from_url("memory://two", waive={"state.model": "why"})

    @promise("state.model")
    @promise("state.large_blob")
    def test_checks_both(self, backend):
        assert False, "state.large_blob is not waived"
"""


def test_a_test_is_waived_only_when_all_its_promises_are(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(TWO_PROMISES)
    run = pytest_in(tmp_path, "test_two.py")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed" in run.stdout and "xfailed" not in run.stdout, run.stdout
