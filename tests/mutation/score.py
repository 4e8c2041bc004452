"""Print the mutation score from the workspace's results and list the survivors.

The score is killed / (the mutants run - equivalent ones); a timeout counts as killed
(the suite did not pass). Mutants not run yet (an interrupted or partial run) are counted
and printed apart, and fail the check like a low score. Equivalent mutants are the ones
docs/mutation.md lists, each with why it behaves like the original; one listed there that
is now killed is reported too.
Per target (``--adapter``): core's list is the section "Equivalent mutants", an
adapter's the one of that name under "The <name> adapter's Python" (``SECTIONS``).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

from tests.mutation.workspace import ROOT, TARGETS, WORKSPACE

DOC = ROOT / "docs" / "mutation.md"
LISTED = re.compile(r"^- `(?P<name>[^`]+)`: (?P<why>.+)$")
KILLED = {1, 3}
TIMEOUT = {-24, 24, 152, 255, 36}
SURVIVED = {0}
UNTESTED = {5, 33}


SECTIONS = {
    "core": ("equivalent mutants", None),
    "file": ("the files adapter's python", "equivalent mutants"),
    "postgres": ("the postgresql adapter's python", "equivalent mutants"),
    "redis": ("the redis adapter's python", "equivalent mutants"),
    "mongo": ("the mongodb adapter's python", "equivalent mutants"),
    "s3": ("the s3 adapter's python", "equivalent mutants"),
}
"""Per target: the headings (level 2, then level 3 or None) of its equivalent-mutant list."""


def equivalents(doc: Path = DOC, target: str = "core") -> dict[str, str]:
    """Mutant name -> why it is equivalent, from the section of the doc that lists them."""
    h2, h3 = SECTIONS[target]
    found: dict[str, str] = {}
    in_h2 = in_section = False
    for line in doc.read_text().splitlines() if doc.exists() else []:
        heading = line.lstrip("#").strip().lower()
        if line.startswith("## "):
            in_h2 = heading.startswith(h2)
            in_section = in_h2 and h3 is None
        elif line.startswith("### ") and h3 is not None:
            in_section = in_h2 and heading.startswith(h3)
        elif in_section and (match := LISTED.match(line)):
            found[match["name"]] = match["why"]
    return found


def results(workspace: Path = WORKSPACE) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in sorted((workspace / "mutants").rglob("*.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def status(code: int | None) -> str:
    if code in KILLED:
        return "killed"
    if code in TIMEOUT:
        return "timeout"
    if code in SURVIVED:
        return "survived"
    if code in UNTESTED:
        return "no tests"
    if code is None:
        return "not checked"
    return f"suspicious ({code})"


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion, in percent: where the score of every
    mutant lies, with 95% confidence, given a uniform sample's (sound near 100%, where the
    normal approximation's interval would pass it)."""
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    half /= 1 + z * z / trials
    return 100.0 * (centre - half), 100.0 * min(1.0, centre + half)


def module_table(codes: dict[str, int | None], equivalent: dict[str, str]) -> str:
    """A markdown table of the verdicts per source module, largest first, with a total."""
    rows: dict[str, Counter[str]] = {}
    for name, code in codes.items():
        module = name.rpartition(".")[0]
        rest = module.partition(".")[2]
        label = f"{rest.replace('.', '/')}.py" if rest else "__init__.py"
        verdict = status(code)
        if verdict == "survived" and name in equivalent:
            verdict = "equivalent"
        elif verdict not in ("killed", "timeout", "not checked"):
            verdict = "survived"
        rows.setdefault(label, Counter())[verdict] += 1
    rows["**all**"] = sum(rows.values(), Counter())
    lines = [
        "| module | mutants | run | killed (by timeout) | equivalent | survivors | score |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, c in sorted(rows.items(), key=lambda item: -item[1].total()):
        run = c.total() - c["not checked"]
        killed = c["killed"] + c["timeout"]
        counted = run - c["equivalent"]
        score = f"{100.0 * killed / counted:.1f}%" if counted else "-"
        cells = [label, c.total(), run, f"{killed:,} ({c['timeout']})", c["equivalent"]]
        lines.append(
            "| "
            + " | ".join(f"{x:,}" if isinstance(x, int) else x for x in cells)
            + f" | {c['survived']} | {score} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--min-score", type=float, default=95.0, help="percent (default 95)")
    parser.add_argument("--adapter", choices=sorted(TARGETS), default="core")
    parser.add_argument(
        "--only", action="append", default=[], help="score only the mutants matching a glob"
    )
    parser.add_argument(
        "--names-from", type=Path, default=None, help="score only the mutants a file names"
    )
    parser.add_argument(
        "--by-module", action="store_true", help="also print a table per module (markdown)"
    )
    args = parser.parse_args()
    codes = results(TARGETS[args.adapter].workspace)
    if args.only:
        codes = {n: c for n, c in codes.items() if any(fnmatch.fnmatch(n, p) for p in args.only)}
    if args.names_from is not None:
        named = set(args.names_from.read_text().split())
        codes = {n: c for n, c in codes.items() if n in named}
    equivalent = equivalents(DOC, args.adapter)
    by_status = Counter(status(code) for code in codes.values())
    unchecked = by_status["not checked"]
    codes_with_unchecked = codes
    codes = {n: c for n, c in codes.items() if c is not None}  # a partial run scores what ran
    survivors = sorted(n for n, c in codes.items() if status(c) not in ("killed", "timeout"))
    unexplained = [n for n in survivors if n not in equivalent]
    stale = sorted(n for n in equivalent if n in codes and n not in survivors)
    counted = len(codes) - sum(1 for n in survivors if n in equivalent)
    killed = by_status["killed"] + by_status["timeout"]
    score = 100.0 * killed / counted if counted else 0.0
    print(
        f"mutants: {len(codes) + unchecked}  "
        + "  ".join(f"{k}: {v}" for k, v in sorted(by_status.items()))
    )
    print(f"equivalent (listed in {DOC.relative_to(ROOT)}): {len(codes) - counted}")
    print(f"score: {killed} killed / {counted} non-equivalent = {score:.1f}%", end="")
    print(f" (of the mutants run; {unchecked} not run yet)" if unchecked else "")
    if args.names_from is not None and counted:
        low, high = wilson(killed, counted)
        print(f"a sample: the whole adapter's score is within {low:.1f}%-{high:.1f}% (95%)")
    if args.by_module:
        print(module_table(codes_with_unchecked, equivalent))
    for name in unexplained:
        print(f"  survivor: {name}  ({status(codes[name])})")
    for name in stale:
        print(f"  listed as equivalent but killed: {name}")
    return 0 if score >= args.min_score and not stale and not unchecked else 1


if __name__ == "__main__":
    sys.exit(main())
