"""Run the adapters' mutants against their contract suites and write the score.

    python -m tests.mutation.adapters.run --adapter postgres [--sample N] [--profile P]

For each mutant (one at a time): the adapter's package is copied into a throwaway folder,
the one fault is planted in the copy, and the adapter's contract suite runs in a fresh
pytest process with the copy first on ``PYTHONPATH`` (so the processes the suite starts
import it too) against a real server: for PostgreSQL and Redis one the runner starts once,
and then only the tests that reach the mutant's file, fastest first (the map of which
test runs which file: :mod:`tests.mutation.adapters.probes`); else the one the suite's
fixtures start. The repository is never edited. Before the mutants the unmutated copy
must pass: else every mutant would count as killed.

Verdicts: ``killed`` (a test failed: pytest exit 1), ``timeout`` (the run outlived its
limit: the baseline's duration times ``--timeout-factor``, at least ``--min-timeout``),
``survived`` (exit 0), ``error`` (anything else: the run proved nothing). A timeout counts
as killed: a fault that makes the suite take many times its unmutated time has made some
call hang or spin, which the suite under CI reports as a failure (pytest-timeout); the
report lists timeouts apart. Results are kept per mutant id and its file's digest in
``tests/mutation/adapters/results/`` (committed: the report covers every adapter, also the
ones a rerun did not touch), so a rerun only runs what changed (``--fresh`` runs all
again), and the report in docs/mutation-adapters.md is rewritten from them.
"""

from __future__ import annotations

import argparse
import contextlib
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
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.mutation.adapters import probes
from tests.mutation.adapters.guard import PROBE_ADAPTER_ENV, PROBE_OUT_ENV
from tests.mutation.adapters.mutants import ADAPTERS, ROOT, Adapter, Mutant, generate
from tests.servers.shared import SHARED_URL_ENV

RESULTS = Path(__file__).with_name("results")
"""Kept in the repository: the score in the docs is rebuilt from every adapter's results."""
GUARD = "tests.mutation.adapters.guard"
BASELINE = "baseline"
"""The results' entry for the unmutated run (its duration sets the per-mutant limit)."""
MAP = "map"
"""The results' entry for the map run: per test, its duration and the files it ran."""
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)
_FAILED_TEST = re.compile(r"^FAILED ", re.MULTILINE)


def _digest(adapter: Adapter) -> str:
    """A digest of the adapter's mutated sources (what the results were once keyed on)."""
    h = hashlib.sha256()
    for pattern in adapter.files:
        for path in sorted(adapter.src.glob(pattern)):
            h.update(path.relative_to(adapter.src).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _file_digest(adapter: Adapter, relative: str) -> str:
    """A digest of one mutated file: a mutant's verdict is kept while its file holds (an
    earlier survivor is run again with ``--rerun survived``)."""
    return hashlib.sha256((adapter.src / relative).read_bytes()).hexdigest()[:16]


def _suite_digest(adapter: Adapter) -> str:
    """A digest of everything the suite's outcome depends on: the adapter's package, core,
    the contract suite, the adapter's tests and the test servers. The baseline and the map
    are made again when it changes."""
    folders = [
        adapter.src,
        ROOT / "packages" / "agentstores" / "src",
        ROOT / "contract_tests" / "src",
        ROOT / adapter.suite[0].split("::")[0].rsplit("/", 1)[0],
        ROOT / "tests" / "servers",
    ]
    h = hashlib.sha256()
    for folder in folders:
        if not folder.is_dir():
            raise RuntimeError(f"{folder} is not a folder: the digest would miss a change")
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(path.relative_to(ROOT).as_posix().encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


def planted(adapter: Adapter, mutant: Mutant | None, into: Path, *, probed: bool = False) -> Path:
    """A copy of ``adapter``'s package under ``into`` with ``mutant`` planted (none: the
    unmutated copy), or (``probed``) a probe at the top of every mutated file; returns the
    folder to put first on ``PYTHONPATH``."""
    target = into / adapter.package
    shutil.copytree(adapter.src, target, ignore=shutil.ignore_patterns("__pycache__"))
    if mutant is not None:
        path = target / mutant.path
        text = path.read_text("utf-8")
        mutated = mutant.apply(text)
        if mutated == text:
            raise RuntimeError(f"{mutant.id} changes nothing")
        path.write_text(mutated, "utf-8")
    if probed:
        for path in _mutated_files(adapter, target):
            relative = path.relative_to(target).as_posix()
            path.write_text(probes.probed_text(adapter.name, relative, path.read_text()))
    return into


def _mutated_files(adapter: Adapter, folder: Path) -> list[Path]:
    return sorted(p for pattern in adapter.files for p in folder.glob(pattern))


def run_suite(
    adapter: Adapter,
    mutant: Mutant | None,
    *,
    profile: str,
    timeout: float,
    select: tuple[str, ...] = (),
    server: str | None = None,
    map_to: Path | None = None,
) -> dict[str, object]:
    """Run ``adapter``'s contract suite (or the tests ``select`` names) with ``mutant``
    planted, on the run's ``server`` when there is one; the verdict, the first failing
    test and the seconds it took. ``map_to``: the map run (probes planted, every test run,
    the map written there)."""
    with tempfile.TemporaryDirectory(prefix="agentstores-mutant-") as tmp:
        root = planted(adapter, mutant, Path(tmp), probed=map_to is not None)
        env = dict(os.environ)
        if server:
            env[SHARED_URL_ENV] = server
        if map_to is not None:
            env[PROBE_OUT_ENV], env[PROBE_ADAPTER_ENV] = str(map_to), adapter.name
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(root), str(ROOT), env.get("PYTHONPATH", "")) if p
        )
        env["AGENTSTORES_MUTANT_ROOT"] = str(root / adapter.package)
        env["AGENTSTORES_MUTANT_PACKAGE"] = adapter.package
        command = [
            sys.executable,
            *("-m", "pytest"),
            *(select or adapter.suite),
            *(() if map_to else ("-x",)),
            *("-q", "-rfE", "-p", "no:randomly", "-p", "no:cacheprovider"),
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
        except BaseException:  # the runner itself was stopped: the run goes with it
            os.killpg(process.pid, signal.SIGKILL)
            raise
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


def _kept(
    adapter: Adapter, results: dict[str, dict[str, object]], chosen: set[str], rerun: list[str]
) -> dict[str, dict[str, object]]:
    """The results still good: a mutant's while its file is unchanged (and it is not to be
    run again); the baseline and the map as they are (checked where they are used)."""
    whole = _digest(adapter)
    kept: dict[str, dict[str, object]] = {}
    for key, value in results.items():
        if key in (BASELINE, MAP):
            kept[key] = value
            continue
        path = adapter.src / str(value["path"])
        if not path.exists():
            continue
        here = _file_digest(adapter, str(value["path"]))
        if value.get("digest") == whole:  # kept under the whole-adapter digest of old
            value = {**value, "digest": here}
        if value.get("digest") != here or value.get("verdict") == "error":
            continue  # a changed file, or a run that proved nothing
        if key in chosen and value.get("verdict") in rerun:
            continue
        kept[key] = value
    return kept


def _server(adapter: Adapter) -> contextlib.AbstractContextManager[str | None]:
    """The run's one server, where the adapter's tests can share it."""
    if adapter.name not in probes.PROBED:
        return contextlib.nullcontext(None)
    from tests.mutation.serve import serving

    return serving(adapter.name)


def _test_map(
    adapter: Adapter, kept: dict[str, dict[str, object]], server: str, profile: str
) -> dict[str, dict[str, object]]:
    """Per test: its duration and the probed files it ran, made again when the suite
    changed."""
    digest = _suite_digest(adapter)
    entry = kept.get(MAP, {})
    if entry.get("digest") == digest and entry.get("profile") == profile:
        return entry["tests"]  # type: ignore[return-value]
    names = [
        probes.probe_name(p.relative_to(adapter.src).as_posix())
        for p in _mutated_files(adapter, adapter.src)
    ]
    probes.prepare(adapter.name, server, names)
    with tempfile.TemporaryDirectory(prefix="agentstores-map-") as tmp:
        out = Path(tmp) / "map.json"
        outcome = run_suite(adapter, None, profile=profile, timeout=3600, server=server, map_to=out)
        if outcome["verdict"] not in ("survived", "killed") or not out.exists():
            raise RuntimeError(f"the map run failed:\n{outcome['tail']}")
        if outcome["verdict"] == "killed":  # a probe in the way: its files are mapped still
            print(f"{adapter.name}: the map run had failures:\n{outcome['tail']}", flush=True)
        tests = json.loads(out.read_text())
    kept[MAP] = {"digest": digest, "profile": profile, "tests": tests}
    return tests  # type: ignore[no-any-return]


def _reaching(tests: dict[str, dict[str, object]], mutant: Mutant) -> tuple[str, ...]:
    """The tests that run ``mutant``'s file, fastest first (the first to fail ends it)."""
    file = probes.probe_name(mutant.path)
    reach = [t for t, v in tests.items() if file in v["files"]]  # type: ignore[operator]
    return tuple(sorted(reach, key=lambda t: (float(tests[t]["seconds"]), t)))  # type: ignore[arg-type]


@dataclass
class _Ground:
    """What every mutant's run is measured against: the unmutated suite's time and (with a
    shared server) the map, made for one state of the suite."""

    digest: str
    seconds: float
    tests: dict[str, dict[str, object]] | None
    overhead: float

    def selection(self, mutant: Mutant) -> tuple[tuple[str, ...], float]:
        """The tests to run for ``mutant`` (empty: the whole suite, or none reach it) and
        the seconds they took unmutated."""
        if self.tests is None:
            return (), self.seconds
        select = _reaching(self.tests, mutant)
        return select, self.overhead + sum(float(self.tests[t]["seconds"]) for t in select)  # type: ignore[arg-type]


def _ground(
    adapter: Adapter, results: dict[str, dict[str, object]], server: str | None, profile: str
) -> _Ground | None:
    """The baseline (run again when the suite changed) and the map; None when the
    unmutated suite fails."""
    digest = _suite_digest(adapter)
    base = results.get(BASELINE, {})
    if (base.get("profile"), base.get("digest"), base.get("shared")) != (
        profile,
        digest,
        bool(server),
    ):
        outcome = run_suite(adapter, None, profile=profile, timeout=3600, server=server)
        if outcome["verdict"] != "survived":
            print(f"{adapter.name}: the unmutated suite does not pass:\n{outcome['tail']}")
            return None
        base = {"seconds": outcome["seconds"], "digest": digest, "profile": profile}
        results[BASELINE] = base | {"shared": bool(server)}
        _save(adapter, results)
    tests = _test_map(adapter, results, server, profile) if server else None
    _save(adapter, results)
    seconds = float(base["seconds"])  # type: ignore[arg-type]
    overhead = seconds
    if tests:
        overhead = max(10.0, seconds - sum(float(t["seconds"]) for t in tests.values()))  # type: ignore[arg-type]
    print(f"{adapter.name}: baseline {seconds:.0f} s, start-up {overhead:.0f} s", flush=True)
    return _Ground(digest, seconds, tests, overhead)


def _run_adapter(adapter: Adapter, chosen: list[Mutant], args: argparse.Namespace) -> int:
    name = adapter.name
    results = {} if args.fresh else load_results(adapter)
    results = _kept(adapter, results, {m.id for m in chosen}, args.rerun)
    _save(adapter, results)
    todo = [m for m in chosen if m.id not in results]
    print(f"{name}: {len(chosen)} chosen, {len(todo)} to run", flush=True)
    if not todo:
        return 0
    with _server(adapter) as server:
        ground = _ground(adapter, results, server, args.profile)
        for k, m in enumerate(todo, 1):
            if ground is not None and _suite_digest(adapter) != ground.digest:
                ground = _ground(adapter, results, server, args.profile)  # tests changed
            if ground is None:
                return 2
            select, spent = ground.selection(m)
            limit = max(args.min_timeout, args.timeout_factor * spent)
            if ground.tests is not None and not select:  # no test runs its file
                outcome: dict[str, object] = {"verdict": "survived", "seconds": 0, "by": ""}
                outcome |= {"tail": "", "unreached": True}
            else:
                outcome = run_suite(
                    adapter, m, profile=args.profile, timeout=limit, select=select, server=server
                )
            tail = str(outcome.pop("tail"))
            if outcome["verdict"] == "error":
                print(tail)
            results[m.id] = {
                **asdict(m),
                **outcome,
                "digest": _file_digest(adapter, m.path),
                "profile": args.profile,
                "tests": len(select) if ground.tests is not None else None,
            }
            _save(adapter, results)
            print(
                f"[{k}/{len(todo)}] {outcome['verdict']:8} {outcome['seconds']:>4}s {m.id}  "
                f"{m.description}  {outcome['by']}",
                flush=True,
            )
    return 0


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
    # Stopped by a signal, the run still stops the server it started (and keeps results).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
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
        code = _run_adapter(adapter, chosen, args)
        if code:
            return code
    if not args.list:
        write_report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
