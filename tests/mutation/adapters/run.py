"""Run the adapters' mutants against their contract suites and write the score.

    python -m tests.mutation.adapters.run --adapter postgres [--sample N] [--profile P]

For each mutant (one at a time): the adapter's package is copied into a throwaway folder,
the one fault is planted in the copy, and the adapter's contract suite runs in a fresh
pytest process with the copy first on ``PYTHONPATH`` (so the processes the suite starts
import it too) against a real server the suite's fixtures start. The repository is never
edited. Before the mutants the unmutated copy must pass: else every mutant would count as
killed.

Verdicts: ``killed`` (a test failed: pytest exit 1), ``timeout`` (the run outlived its
limit: the baseline's duration times ``--timeout-factor``, at least ``--min-timeout``),
``survived`` (exit 0), ``error`` (anything else: the run proved nothing). A timeout counts
as killed: a fault that makes the suite take many times its unmutated time has made some
call hang or spin, which the suite under CI reports as a failure (pytest-timeout); the
report lists timeouts apart. Results are kept per mutant id and source digest in
``tests/mutation/adapters/results/`` (committed: the report covers every adapter, also the
ones a rerun did not touch), so a rerun only runs what changed (``--fresh`` runs all
again), and the report in docs/mutation-adapters.md is rewritten from them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from tests.mutation.adapters.mutants import ADAPTERS, ROOT, Adapter, Mutant, generate

RESULTS = Path(__file__).with_name("results")
"""Kept in the repository: the score in the docs is rebuilt from every adapter's results."""
GUARD = "tests.mutation.adapters.guard"
BASELINE = "baseline"
"""The results' entry for the unmutated run (its duration sets the per-mutant limit)."""
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)
_FAILED_TEST = re.compile(r"^FAILED ", re.MULTILINE)


def _digest(adapter: Adapter) -> str:
    """A digest of the adapter's mutated sources: a result is reused only while it holds."""
    h = hashlib.sha256()
    for pattern in adapter.files:
        for path in sorted(adapter.src.glob(pattern)):
            h.update(path.relative_to(adapter.src).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def planted(adapter: Adapter, mutant: Mutant | None, into: Path) -> Path:
    """A copy of ``adapter``'s package under ``into`` with ``mutant`` planted (none: the
    unmutated copy); returns the folder to put first on ``PYTHONPATH``."""
    target = into / adapter.package
    shutil.copytree(adapter.src, target, ignore=shutil.ignore_patterns("__pycache__"))
    if mutant is not None:
        path = target / mutant.path
        text = path.read_text("utf-8")
        mutated = mutant.apply(text)
        if mutated == text:
            raise RuntimeError(f"{mutant.id} changes nothing")
        path.write_text(mutated, "utf-8")
    return into


def run_suite(
    adapter: Adapter,
    mutant: Mutant | None,
    *,
    profile: str,
    timeout: float,
    select: tuple[str, ...] = (),
) -> dict[str, object]:
    """Run ``adapter``'s contract suite (or the tests ``select`` names) with ``mutant``
    planted; the verdict, the first failing test and the seconds it took."""
    with tempfile.TemporaryDirectory(prefix="agentstores-mutant-") as tmp:
        root = planted(adapter, mutant, Path(tmp))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(root), str(ROOT), env.get("PYTHONPATH", "")) if p
        )
        env["AGENTSTORES_MUTANT_ROOT"] = str(root / adapter.package)
        env["AGENTSTORES_MUTANT_PACKAGE"] = adapter.package
        command = [
            sys.executable,
            *("-m", "pytest"),
            *(select or adapter.suite),
            *("-x", "-q", "-rfE", "-p", "no:randomly", "-p", "no:cacheprovider"),
            *("-p", GUARD, f"--agentstores-profile={profile}"),
        ]
        began = time.monotonic()
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the servers the run started go too
            output, _ = process.communicate()
            return {
                "verdict": "timeout",
                "seconds": round(time.monotonic() - began),
                "by": "",
                "tail": output[-2000:],
            }
        seconds = round(time.monotonic() - began)
    verdict = {0: "survived", 1: "killed"}.get(process.returncode, "error")
    failed = _FAILED.findall(output)
    if verdict == "killed" and not _FAILED_TEST.search(output):
        verdict = "invalid"  # only set-up errors: the server refused the mutant's text
    return {
        "verdict": verdict,
        "seconds": seconds,
        "by": failed[0] if failed else "",
        "tail": "" if verdict == "survived" else output[-2000:],
    }


def _results_path(adapter: Adapter) -> Path:
    return RESULTS / f"{adapter.name}.json"


def load_results(adapter: Adapter) -> dict[str, dict[str, object]]:
    path = _results_path(adapter)
    return json.loads(path.read_text()) if path.exists() else {}


def _save(adapter: Adapter, results: dict[str, dict[str, object]]) -> None:
    RESULTS.mkdir(exist_ok=True)
    _results_path(adapter).write_text(json.dumps(results, indent=1, sort_keys=True))


def sample(mutants: list[Mutant], n: int | None, seed: int) -> list[Mutant]:
    """``n`` mutants drawn with ``seed`` (all when ``n`` is None), in file order."""
    if n is None or n >= len(mutants):
        return mutants
    chosen = set(random.Random(seed).sample(range(len(mutants)), n))
    return [m for i, m in enumerate(mutants) if i in chosen]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", choices=sorted(ADAPTERS), action="append", required=True)
    parser.add_argument("--sample", type=int, default=None, help="run N mutants (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", action="append", default=[], help="run this mutant id")
    parser.add_argument("--profile", default="mutation", help="the suite profile per mutant")
    parser.add_argument("--timeout-factor", type=float, default=3.0)
    parser.add_argument("--min-timeout", type=float, default=120.0)
    parser.add_argument("--fresh", action="store_true", help="forget earlier results")
    parser.add_argument(
        "--rerun", action="append", default=[], help="run again the mutants with this verdict"
    )
    parser.add_argument("--list", action="store_true", help="print the mutants and stop")
    args = parser.parse_args(argv)
    from tests.mutation.adapters.report import write_report

    for name in args.adapter:
        adapter = ADAPTERS[name]
        mutants = generate(adapter)
        if args.list:
            for m in mutants:
                print(f"{m.id}  {m.path}:{m.line}  {m.description}")
            continue
        chosen = (
            [m for m in mutants if m.id in args.only]
            if args.only
            else sample(mutants, args.sample, args.seed)
        )
        digest = _digest(adapter)
        results = {} if args.fresh else load_results(adapter)
        chosen_ids = {m.id for m in chosen}
        results = {
            k: v
            for k, v in results.items()
            if v.get("digest") == digest
            and (k not in chosen_ids or v.get("verdict") not in args.rerun)
        }
        todo = [m for m in chosen if m.id not in results]
        print(
            f"{name}: {len(mutants)} mutants, {len(chosen)} chosen, {len(todo)} to run", flush=True
        )
        if not todo:
            continue
        base = results.get(BASELINE, {})
        if base.get("profile") != args.profile:
            base = run_suite(adapter, None, profile=args.profile, timeout=3600)
            if base.pop("verdict") != "survived":
                print(
                    f"{name}: the unmutated suite does not pass:\n{base['tail']}", file=sys.stderr
                )
                return 2
            base = {"seconds": base["seconds"], "digest": digest, "profile": args.profile}
            results[BASELINE] = base
            _save(adapter, results)
        limit = max(args.min_timeout, args.timeout_factor * float(base["seconds"]))  # type: ignore[arg-type]
        print(f"{name}: baseline {base['seconds']} s, limit {limit:.0f} s per mutant", flush=True)
        for k, m in enumerate(todo, 1):
            outcome = run_suite(adapter, m, profile=args.profile, timeout=limit)
            tail = str(outcome.pop("tail"))
            if outcome["verdict"] == "error":
                print(tail, file=sys.stderr)
            results[m.id] = {**asdict(m), **outcome, "digest": digest, "profile": args.profile}
            _save(adapter, results)
            print(
                f"[{k}/{len(todo)}] {outcome['verdict']:8} {outcome['seconds']:>4}s {m.id}  "
                f"{m.description}  {outcome['by']}",
                flush=True,
            )
        _save(adapter, results)
    if not args.list:
        write_report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
