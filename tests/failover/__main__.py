"""Run failover drills N times each and write the table.

``python -m tests.failover [--drills a,b] [--runs N] [--seconds S] [--out DOCS]
[--render]``:
every drill of :data:`~tests.failover.drills.DRILLS` by default. Writes
``DOCS/bench/failover.json`` (every run's counts; a drill not run this time keeps its
figures from the last file) and the table between the markers of ``DOCS/failover.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .drills import DRILLS, run_once
from .workload import Config

START = "<!-- failover-table:start -->"
END = "<!-- failover-table:end -->"
COLUMNS = (
    "runs",
    "failovers",
    "acknowledged calls",
    "acknowledged writes lost",
    "runs with a violation",
    "double winners",
    "fenced writes accepted",
    "unknown outcomes",
    "linearizable",
)


def _violations(counts: dict[str, Any]) -> int:
    """A run's broken promises: writes lost, double winners, fenced writes accepted."""
    return int(counts["lost"] + counts["double_winners"] + counts["fenced_accepted"])


def summarize(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One drill's totals over its runs."""
    lin = [v for r in runs for v in r["counts"]["linearizable"]]
    return {
        "drill": name,
        "description": runs[0]["description"] if runs else name,
        "runs": len(runs),
        "failovers": sum(r["fault"].get("failovers", 0) for r in runs),
        "acked": sum(r["counts"]["acked"] for r in runs),
        "lost": sum(r["counts"]["lost"] for r in runs),
        "runs_violating": sum(1 for r in runs if _violations(r["counts"])),
        "double_winners": sum(r["counts"]["double_winners"] for r in runs),
        "fenced_accepted": sum(r["counts"]["fenced_accepted"] for r in runs),
        "unknown": sum(r["counts"]["unknown"] for r in runs),
        "calls": sum(r["counts"]["calls"] for r in runs),
        "linearizable": f"{sum(v is True for v in lin)}/{len(lin)}"
        + (f" ({sum(v is None for v in lin)} undecided)" if any(v is None for v in lin) else ""),
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| configuration | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    for r in rows:
        cells = (
            r["runs"],
            r["failovers"],
            f"{r['acked']:,}",
            r["lost"],
            f"{r['runs_violating']} of {r['runs']}",
            r["double_winners"],
            r["fenced_accepted"],
            f"{r['unknown']:,} of {r['calls']:,} calls",
            r["linearizable"],
        )
        lines.append(f"| {r['description']} | " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def write_table(page: Path, text: str) -> None:
    """Replace the text between the markers of ``page`` with ``text``."""
    content = page.read_text()
    head, found, rest = content.partition(START)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise SystemExit(f"{page} has no {START} ... {END} markers")
    page.write_text(f"{head}{START}\n{text}\n{END}{tail}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    config = Config(duration=args.seconds, fault_at=args.seconds * 0.4)
    report: dict[str, Any] = {"drills": {}}
    for name in args.drills:
        runs = []
        for n in range(args.runs):
            started = time.monotonic()
            counts, info = await run_once(name, config)
            entry = {"counts": counts.as_dict(), **info}
            runs.append(entry)
            c = counts
            print(
                f"{name} run {n + 1}/{args.runs}: {c.acked} acked, {c.lost} lost, "
                f"{c.double_winners} double winners, {c.fenced_accepted} fenced accepted, "
                f"{c.unknown} unknown, failovers {info['fault'].get('failovers')}, "
                f"linearizable {c.linearizable} ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
            for example in c.examples[:5]:
                print(f"    {example}", flush=True)
        report["drills"][name] = {
            "summary": summarize(name, runs),
            "config": asdict(config),
            "runs": runs,
        }
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.failover")
    parser.add_argument("--drills", default=",".join(DRILLS), type=lambda s: s.split(","))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument(
        "--render", action="store_true", help="run nothing: write the table from the JSON"
    )
    args = parser.parse_args(argv)
    if args.render:
        args.drills = []
    # asyncpg logs every failed reconnection of a pool's floor while no server answers
    logging.getLogger("asyncpg").setLevel(logging.CRITICAL)
    report = asyncio.run(run(args))
    report["machine"] = (
        f"{platform.system()} {platform.machine()}, Python {platform.python_version()}"
    )
    saved = args.out / "bench" / "failover.json"
    if saved.exists():  # drills not run this time keep their last figures
        earlier = json.loads(saved.read_text()).get("drills", {})
        report["drills"] = {**earlier, **report["drills"]}
    order = [name for name in DRILLS if name in report["drills"]]
    order += [name for name in report["drills"] if name not in DRILLS]
    report["drills"] = {name: report["drills"][name] for name in order}
    for name, drill in report["drills"].items():  # the summary, from the runs kept
        drill["summary"] = summarize(name, drill["runs"])
    text = table([d["summary"] for d in report["drills"].values()])
    print(text)
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(report, indent=1) + "\n")
    write_table(args.out / "failover.md", text)


if __name__ == "__main__":
    main()
