"""``agentstores check URL``: run the contract suite against a backend and report per promise.

The suite lives in the ``agentstores-contract`` distribution; this command only drives it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

INSTALL_HINT = (
    "agentstores check needs the contract suite, which is not installed.\n"
    "Install it with: pip install agentstores-contract"
)


def register(subparsers: Any) -> None:
    """Add the ``check`` subcommand to the CLI's parser."""
    p = subparsers.add_parser(
        "check",
        help="run the contract suite against a backend URL",
        description=(
            "Runs every contract promise against the backend URL names (it must be "
            "reachable and writable: tests write under fresh random tenants). Prints a "
            "line per promise as results arrive, then a table. Exits 1 if any promise "
            "fails, 2 if the suite cannot run."
        ),
    )
    p.add_argument("url", help="backend URL, e.g. postgresql://user@host/db or memory://")
    p.add_argument("--json", action="store_true", help="print only the JSON report")
    p.add_argument(
        "--profile",
        default=None,
        help="suite profile: quick, ci (default) or deep (about ten times the examples)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for the generated values (default: a fresh one, printed; a failure "
        "prints the command that replays it)",
    )
    p.add_argument(
        "--promise",
        action="append",
        default=[],
        metavar="GLOB",
        help="check only promises matching this pattern, e.g. 'fencing.*' (repeatable)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the suite and print the report; 0 all kept, 1 a promise failed (a method that
    raises ``NotImplementedError`` included), 2 the suite could not run."""
    try:
        from agentstores_contract import seeds, validate
        from agentstores_contract.profiles import PROFILES
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "agentstores_contract":
            raise
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    if args.profile is not None and args.profile not in PROFILES:
        print(f"unknown profile {args.profile!r}; choose from {sorted(PROFILES)}", file=sys.stderr)
        return 2
    if args.seed is not None and args.seed < 0:
        print(f"a seed is a non-negative integer, got {args.seed}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else seeds.fresh()
    done = 0

    def progress(result: Any) -> None:
        nonlocal done
        done += 1
        detail = f"  {result.reason}" if result.outcome != "passed" and result.reason else ""
        print(f"[{done:3}] {result.outcome.upper():<7} {result.name}{detail[:160]}", flush=True)

    if not args.json:
        print(f"checking {args.url} (profile {args.profile or 'ci'}, seed {seed})", flush=True)
    report = validate(
        args.url,
        profile=args.profile,
        promises=args.promise,
        on_result=None if args.json else progress,
        seed=seed,
    )
    if args.json:
        print(report.to_json())
    else:
        print()
        print(report.table(width=120))
    if report.error is not None:
        return 2
    return 0 if report.ok else 1
