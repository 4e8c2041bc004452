"""The suite proves it can fail: it must fail every broken backend, naming its promise.

Each mutant gets the whole contract suite (profile ``quick``); the runs are spread over
a few worker processes. The reference backend runs through the same path as a control.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentstores_contract import Report
from tests.catalogue.mutants import CONTROL, MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
"""Processes at once: part of each run waits on the suite's short sleeps."""
PROFILE = "quick"
TIMEOUT = 1500

pytestmark = pytest.mark.timeout(TIMEOUT + 60)


def run_batch(names: list[str]) -> dict[str, Report]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.catalogue._batch", PROFILE, *names],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    out: dict[str, Report] = {}
    for line in proc.stdout.splitlines():
        entry = json.loads(line)
        if "error" in entry:
            raise AssertionError(f"the suite could not run on {entry['name']}:\n{entry['error']}")
        out[entry["name"]] = Report.from_dict(entry["report"])
    missing = set(names) - set(out)
    assert not missing, f"no report for {sorted(missing)}:\n{proc.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    names = [m.name for m in [CONTROL, *MUTANTS]]
    batches = [names[i::WORKERS] for i in range(WORKERS)]
    merged: dict[str, Report] = {}
    with ThreadPoolExecutor(WORKERS) as pool:
        for part in pool.map(run_batch, batches):
            merged.update(part)
    return merged


def test_reference_passes_through_the_same_path(reports: dict[str, Report]) -> None:
    report = reports[CONTROL.name]
    assert report.ok, f"the unbroken reference failed:\n{report.table()}"


def _killed(mutant: Mutant, report: Report) -> bool:
    failed = {p.name for p in report.failed}
    return report.error is None and bool(failed) and (not mutant.breaks or mutant.breaks in failed)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_suite_fails_the_mutant_naming_its_promise(
    mutant: Mutant, reports: dict[str, Report]
) -> None:
    report = reports[mutant.name]
    assert report.error is None, f"{mutant.name}: the run broke: {report.error}"
    failed = sorted(p.name for p in report.failed)
    assert failed, f"the suite passed {mutant.name}, which breaks {mutant.breaks or 'a promise'}"
    assert _killed(mutant, report), (
        f"{mutant.name} breaks {mutant.breaks}; the suite blamed {failed}"
    )


def test_kill_rate(reports: dict[str, Report], capsys: pytest.CaptureFixture[str]) -> None:
    rows = []
    for m in MUTANTS:
        failed = sorted(p.name for p in reports[m.name].failed)
        verdict = "KILLED" if _killed(m, reports[m.name]) else "SURVIVED"
        rows.append(
            f"  {m.name:<30} {'racy' if m.racy else 'seq':<5}{verdict:<9}"
            f"breaks {m.breaks or '(any)'}; failed: {', '.join(failed) or 'nothing'}"
        )
    killed = sum(_killed(m, reports[m.name]) for m in MUTANTS)
    racy = next(m for m in MUTANTS if m.name == "racy_cas")
    witness = reports[racy.name].by_name()[racy.breaks]
    with capsys.disabled():
        print(
            f"\nbroken-backend catalogue, profile {PROFILE}: {killed}/{len(MUTANTS)} killed "
            f"({100 * killed / len(MUTANTS):.0f}%)"
        )
        print("\n".join(rows))
        print(f"racy_cas (correct one call at a time) fails {racy.breaks}: {witness.reason}")
    assert killed == len(MUTANTS)
