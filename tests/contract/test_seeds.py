"""A failing suite run names its seed and the command that replays it, and replays it."""

from __future__ import annotations

import re
import shlex
import uuid
from pathlib import Path

import pytest

from agentstores_contract import seeds, validate
from agentstores_contract.validation import FAILED
from tests.contract.test_suite_itself import pytest_in

MUTANT = "tests.catalogue.mutants:truncate_keeps_user_message"


def test_a_failure_prints_its_seed_and_a_replay_command_that_fails_the_same(
    tmp_path: Path,
) -> None:
    args = ["--agentstores-factory", MUTANT, "--agentstores-promise", "conversations.truncate"]
    first = pytest_in(
        tmp_path, *args, "--agentstores-profile", "quick", "--agentstores-seed", "4242"
    )
    assert first.returncode == 1, first.stdout + first.stderr
    assert "(profile quick, seed 4242)" in first.stdout, "the header names the seed"
    replay = (
        f"pytest --agentstores-factory {MUTANT} --agentstores-promise conversations.truncate "
        "--agentstores-profile quick --agentstores-seed 4242"
    )
    assert replay in first.stdout, first.stdout[-3000:]
    assert "agentstores contract replay" in first.stdout
    again = pytest_in(tmp_path, *shlex.split(replay)[1:])
    assert again.returncode == 1, again.stdout + again.stderr
    assert summary(again.stdout) == summary(first.stdout), "the replay failed differently"


def summary(output: str) -> str:
    line = next(line for line in reversed(output.splitlines()) if " failed" in line)
    return line.strip("= ").rsplit(" in ", 1)[0]


def test_the_same_seed_draws_the_same_failing_example() -> None:
    """The state machine finds this mutant under most seeds of ``quick``, not all;
    whatever a seed found, the same seed finds again, shrunk to the same example."""
    mutant = "tests.catalogue.mutants_models:stale_append_bumps_updated_at"

    def model_verdict(seed: int) -> tuple[str, str]:
        report = validate(
            factory=mutant, profile="quick", promises=["conversations.model"], seed=seed
        )
        assert report.error is None, report.error
        verdict = report.by_name()["conversations.model"]
        reason = re.sub(r"ct-[0-9a-f]{32}", "ct-<fresh>", verdict.reason)
        reason = re.sub(r"datetime\.datetime\([^)]*\)", "<time>", reason)  # the store clock
        reason = re.sub(r"\d{4}-\d\d-\d\d[ T][\d:.]+(\+00:00)?", "<time>", reason)
        # pytest shortens a long repr around a cut whose place moves with the clock's digits,
        # so compare the failed check and the shrunk example, not the values dumped between
        head, _, example = reason.partition("Failing test case:")
        return verdict.outcome, head.split(" assert ", 1)[0] + " | " + example

    for seed in range(100, 120):
        outcome, reason = model_verdict(seed)
        if outcome == FAILED:
            assert model_verdict(seed) == (outcome, reason), f"seed {seed} did not replay"
            return
    pytest.fail("no seed in 100..119 let the conversation model find the mutant")


def test_validate_reports_its_seed_and_how_to_replay_each_failure() -> None:
    report = validate(factory=MUTANT, profile="quick", promises=["conversations.truncate"], seed=5)
    assert report.seed == 5 and not report.ok
    command = report.replays["conversations.truncate"]
    assert command.startswith(f"pytest --agentstores-factory {MUTANT} ")
    assert "--agentstores-seed 5" in command and "seed 5" in report.table()
    url = f"memory://{uuid.uuid4().hex}"
    passing = validate(url, profile="quick", promises=["keys.validation"])
    assert passing.ok and passing.seed is not None and passing.replays == {}


def test_seeds_are_non_negative_integers() -> None:
    assert seeds.parse("17") == 17
    for bad in ("-1", "x", "1.5"):
        with pytest.raises(ValueError, match="non-negative integer"):
            seeds.parse(bad)
