"""Run the network-fault workload on every networked backend and write the table.

``python -m tests.netfaults [--only postgres,redis] [--seconds 20] [--runs 1] [--seed 1]
[--out DOCS]``: each backend on a fresh private server (PostgreSQL 18, Valkey 9,
nx-27017, moto), ``--runs`` runs each with seeds ``seed, seed+1, ...``. Writes
``DOCS/bench/netfaults.json`` (every run's report; a backend not run this time keeps its
last figures) and the table between the markers of ``DOCS/netfaults.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
from collections import Counter
from pathlib import Path
from typing import Any

from tests.failover.workload import Config

from .run import run_once
from .servers import BACKENDS, REPLY_TIMEOUT, served

START = "<!-- netfaults-table:start -->"
END = "<!-- netfaults-table:end -->"
NAMES = {"postgres": "PostgreSQL 18", "redis": "Valkey 9", "mongo": "nx-27017", "s3": "moto (S3)"}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One backend's totals over its runs."""
    total: Counter[str] = Counter()
    settled: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    steps: Counter[str] = Counter()
    struck: Counter[str] = Counter()
    for r in runs:
        c, s = r["counts"], r["settlement"]
        for name in ("calls", "acked", "lost", "double_winners", "fenced_accepted"):
            total[name] += c[name]
        for name in ("unknown", "twice", "denied_but_landed", "hung", "untyped"):
            total[name] += s[name]
        total["linearizable"] += sum(v is True for v in c["linearizable"])
        total["histories"] += len(c["linearizable"])
        settled.update(s["settled"])
        outcomes.update(s["outcomes"])
        steps.update(r["faults"].get("steps", {}))
        struck.update(r["faults"].get("struck", {}))
    return {
        "runs": len(runs),
        **total,
        "outcomes": dict(outcomes),
        "settled": dict(sorted(settled.items())),
        "steps": dict(steps),
        "struck": dict(struck),
    }


def _how(settled: dict[str, int], suffixes: tuple[str, ...]) -> int:
    return sum(n for how, n in settled.items() if how.split(" ", 1)[1] in suffixes)


def table(summaries: dict[str, dict[str, Any]]) -> str:
    head = (
        "| backend | runs | calls | acknowledged | refused | unknown outcomes | "
        "settled: landed once | settled: did not land | claims raced, one landed | "
        "no effect to settle | state overwritten | applied twice | acked writes lost | "
        "refused yet applied | double winners | fenced writes accepted | "
        "calls that never ended | lease histories linearizable |"
    )
    lines = [head, "|---|" + "---:|" * 17]
    for backend, t in summaries.items():
        o, s = t["outcomes"], t["settled"]
        unknown = (
            f"{t['unknown']} ({o.get('UnknownOutcomeError', 0)} unknown, "
            f"{o.get('BackendUnavailableError', 0)} unavailable)"
        )
        cells = (
            t["runs"],
            f"{t['calls']:,}",
            f"{t['acked']:,}",
            f"{o.get('refused', 0):,}",
            unknown,
            _how(s, ("landed",)),
            _how(s, ("not_landed",)),
            _how(s, ("rival",)),
            _how(s, ("no_effect",)),
            _how(s, ("overwritten",)),
            t["twice"],
            t["lost"],
            t["denied_but_landed"],
            t["double_winners"],
            t["fenced_accepted"],
            t["hung"],
            f"{t['linearizable']}/{t['histories']}",
        )
        lines.append(f"| {NAMES.get(backend, backend)} | " + " | ".join(map(str, cells)) + " |")
    faults = ["", "| backend | faults switched on | connections struck |", "|---|---|---|"]
    for backend, t in summaries.items():
        steps = ", ".join(f"{k} {v}" for k, v in sorted(t["steps"].items()))
        struck = ", ".join(f"{k} {v}" for k, v in sorted(t["struck"].items()))
        faults.append(f"| {NAMES.get(backend, backend)} | {steps} | {struck} |")
    return "\n".join(lines + faults)


def write_table(page: Path, text: str) -> None:
    """Replace the text between the markers of ``page`` with ``text``."""
    content = page.read_text()
    head, found, rest = content.partition(START)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise SystemExit(f"{page} has no {START} ... {END} markers")
    page.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def run_backend(backend: str, args: argparse.Namespace, config: Config) -> list[dict[str, Any]]:
    runs = []
    with served(backend) as target:
        for n in range(args.runs):
            seed = args.seed + n
            report = asyncio.run(run_once(target, seed=seed, config=config))
            c, s = report["counts"], report["settlement"]
            print(
                f"{backend} seed {seed}: {c['calls']} calls, {c['acked']} acked, "
                f"{s['unknown']} unknown {s['settled']}, twice {s['twice']}, lost {c['lost']}, "
                f"refused yet applied {s['denied_but_landed']}, hung {s['hung']}, "
                f"faults {report['faults']} ({report['seconds']} s)",
                flush=True,
            )
            for failed in report["workers_failed"]:
                print(f"    {failed[-300:]}", flush=True)
            for example in (c["examples"] + s["examples"])[:5]:
                print(f"    {example}", flush=True)
            runs.append(report)
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.netfaults")
    parser.add_argument("--only", default=",".join(BACKENDS), type=lambda s: s.split(","))
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("docs"))
    args = parser.parse_args(argv)
    unknown = set(args.only) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; choose from {', '.join(BACKENDS)}")
    # asyncpg logs every failed reconnection of a pool's floor while the network is down
    logging.getLogger("asyncpg").setLevel(logging.CRITICAL)
    # faults begin once every bundle (and the worker process's) has had time to open
    config = Config(duration=args.seconds, fault_at=10.0, call_timeout=60.0)
    report: dict[str, Any] = {"backends": {}}
    for backend in args.only:
        runs = run_backend(backend, args, config)
        report["backends"][backend] = {"summary": summarize(runs), "runs": runs}
    machine = f"{platform.system()} {platform.machine()}, Python {platform.python_version()}"
    report["machine"] = machine
    report["reply_timeout"] = REPLY_TIMEOUT
    saved = args.out / "bench" / "netfaults.json"
    if saved.exists():  # backends not run this time keep their last figures
        earlier = json.loads(saved.read_text()).get("backends", {})
        report["backends"] = {**earlier, **report["backends"]}
    report["backends"] = {b: report["backends"][b] for b in BACKENDS if b in report["backends"]}
    text = table({b: d["summary"] for b, d in report["backends"].items()})
    print(text)
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(report, indent=1) + "\n")
    write_table(args.out / "netfaults.md", text)


if __name__ == "__main__":
    main()
