"""The suite proves it can fail: it must fail every broken backend, naming its promise.

Each mutant gets the whole contract suite; the runs are spread over a few worker
processes. The reference backend runs through the same path as a control.

The README's test run checks each mutant once (profile ``quick``, one fresh seed), against
the tests of the promise it names (``_batch``'s scope ``promise``). ``nox -s catalogue``
(and ``nox -s deep``) sets ``AGENTSTORES_CATALOGUE_PROFILE=ci``,
``AGENTSTORES_CATALOGUE_SEEDS=3`` and ``AGENTSTORES_CATALOGUE_SCOPE=suite``: the whole
suite against each mutant, which must then be killed under each of three seeds, since
one killed one time in three is a flaky test, not a kill.
``AGENTSTORES_CATALOGUE_SEEDS`` also takes a comma-separated list of seeds to replay.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentstores_contract import Report, seeds
from tests.catalogue._batch import HUNG
from tests.catalogue.catalogue import CONTROL, MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
"""Processes at once: part of each run waits on the suite's short sleeps."""
PROFILE = os.environ.get("AGENTSTORES_CATALOGUE_PROFILE", "quick")
SCOPE = os.environ.get("AGENTSTORES_CATALOGUE_SCOPE", "promise")
TIMEOUT = 2400


def _seeds(spec: str) -> list[int]:
    if "," in spec:
        return [seeds.parse(part) for part in spec.split(",") if part.strip()]
    return [seeds.fresh() for _ in range(seeds.parse(spec))] if spec else [seeds.fresh()]


SEEDS = _seeds(os.environ.get("AGENTSTORES_CATALOGUE_SEEDS", "1"))

pytestmark = pytest.mark.timeout(TIMEOUT * len(SEEDS) + 60)

Reports = dict[tuple[str, int], Report]


def run_batch(seed: int, names: list[str]) -> Reports:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.catalogue._batch", PROFILE, str(seed), *names],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    if proc.returncode == HUNG:
        done = [json.loads(line)["name"] for line in proc.stdout.splitlines()]
        raise AssertionError(
            f"a catalogue entry hung (seed {seed}; finished first: {done}):\n{proc.stderr[-12000:]}"
        )
    out: Reports = {}
    for line in proc.stdout.splitlines():
        entry = json.loads(line)
        if "error" in entry:
            raise AssertionError(f"the suite could not run on {entry['name']}:\n{entry['error']}")
        out[(entry["name"], seed)] = Report.from_dict(entry["report"])
    missing = set(names) - {name for name, _ in out}
    assert not missing, f"no report for {sorted(missing)} (seed {seed}):\n{proc.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def reports() -> Reports:
    names = [m.name for m in [CONTROL, *MUTANTS]]
    batches = [(seed, names[i::WORKERS]) for seed in SEEDS for i in range(WORKERS)]
    merged: Reports = {}
    with ThreadPoolExecutor(WORKERS) as pool:
        for part in pool.map(lambda batch: run_batch(*batch), batches):
            merged.update(part)
    return merged


def _replay(mutant: Mutant, seed: int) -> str:
    return (
        f"AGENTSTORES_CATALOGUE_PROFILE={PROFILE} AGENTSTORES_CATALOGUE_SEEDS={seed}, "
        f"AGENTSTORES_CATALOGUE_SCOPE={SCOPE} "
        f"pytest tests/catalogue -k {mutant.name}"
    )


def test_reference_passes_through_the_same_path(reports: Reports) -> None:
    for seed in SEEDS:
        report = reports[(CONTROL.name, seed)]
        assert report.ok, f"the unbroken reference failed (seed {seed}):\n{report.table()}"


def _killed(mutant: Mutant, report: Report) -> bool:
    failed = {p.name for p in report.failed}
    return report.error is None and bool(failed) and (not mutant.breaks or mutant.breaks in failed)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_suite_fails_the_mutant_naming_its_promise(mutant: Mutant, reports: Reports) -> None:
    for seed in SEEDS:
        report = reports[(mutant.name, seed)]
        assert report.error is None, f"{mutant.name} (seed {seed}): the run broke: {report.error}"
        failed = sorted(p.name for p in report.failed)
        assert failed, (
            f"the suite passed {mutant.name}, which breaks {mutant.breaks or 'a promise'}, "
            f"with seed {seed} of {SEEDS}; replay: {_replay(mutant, seed)}"
        )
        assert _killed(mutant, report), (
            f"{mutant.name} breaks {mutant.breaks}; with seed {seed} the suite blamed {failed}"
        )


def test_kill_rate(reports: Reports, capsys: pytest.CaptureFixture[str]) -> None:
    rows = []
    for m in MUTANTS:
        runs = [reports[(m.name, seed)] for seed in SEEDS]
        kills = sum(_killed(m, r) for r in runs)
        failed = sorted({p.name for r in runs for p in r.failed})
        verdict = "KILLED" if kills == len(SEEDS) else f"SURVIVED {len(SEEDS) - kills}x"
        rows.append(
            f"  {m.name:<34} {'racy' if m.racy else 'seq':<5}{verdict:<12}"
            f"breaks {m.breaks or '(any)'}; failed: {', '.join(failed) or 'nothing'}"
        )
    killed = sum(all(_killed(m, reports[(m.name, s)]) for s in SEEDS) for m in MUTANTS)
    racy = next(m for m in MUTANTS if m.name == "racy_cas")
    witness = reports[(racy.name, SEEDS[0])].by_name()[racy.breaks]
    with capsys.disabled():
        print(
            f"\nbroken-backend catalogue, profile {PROFILE}, scope {SCOPE}, seeds {SEEDS}: "
            f"{killed}/{len(MUTANTS)} killed under every seed "
            f"({100 * killed / len(MUTANTS):.0f}%)"
        )
        print("\n".join(rows))
        print(f"racy_cas (correct one call at a time) fails {racy.breaks}: {witness.reason}")
    assert killed == len(MUTANTS)
