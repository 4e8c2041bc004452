"""``agentstores check URL``: run the contract suite against a backend and report per promise.

The suite lives in the ``agentstores-contract`` distribution; this command only drives it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._exits import CANNOT_RUN, FOUND_PROBLEM, OK, HelpFormatter, epilog

INSTALL_HINT = (
    "agentstores check needs the contract suite, which is not installed.\n"
    "Install it with: pip install agentstores-contract"
)
TWO_FORMS = (
    "give a backend URL (scheme://..., e.g. postgresql://user@host/db, "
    "file://./.agentstores, memory://) or --factory module:callable"
)
PROGRESS_WIDTH = 160
"""Characters of a failure's reason on its progress line; the table ends with it in full."""


def register(subparsers: Any) -> None:
    """Add the ``check`` subcommand to the CLI's parser."""
    p = subparsers.add_parser(
        "check",
        help="run the contract suite against a backend URL",
        description=(
            "Runs every contract promise against the backend URL names (it must be "
            "reachable and writable: tests write under fresh random tenants). The backend "
            "is opened once first: when that fails, the one line saying why is all it "
            "prints. Then a line per promise as results arrive, then a table."
        ),
        epilog=epilog(
            "every promise kept (or skipped for a capability the backend does not declare)",
            "a promise failed (a method that raises NotImplementedError included)",
            "usage error, or the suite could not run (backend unreachable, unknown URL "
            "option or scheme, the contract suite not installed)",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "url", nargs="?", help="backend URL, e.g. postgresql://user@host/db or memory://"
    )
    p.add_argument(
        "--factory",
        metavar="MODULE:CALLABLE",
        help="check the backend this callable makes instead of a URL's (called with no "
        "arguments; returns a BackendUnderTest or an unopened Stores bundle)",
    )
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


def target_problem(url: str | None, factory: str | None) -> str | None:
    """Why the positional URL and ``--factory`` do not name exactly one backend, or None."""
    if url is not None and factory is not None:
        return "give a backend URL or --factory, not both"
    if url is None and factory is None:
        return TWO_FORMS
    if url is not None and "://" not in url:
        return f"{url!r} is not a backend URL; {TWO_FORMS}"
    if factory is not None and (":" not in factory or "://" in factory):
        return f"--factory takes module:callable, got {factory!r}"
    return None


def _fail(message: str) -> int:
    print(f"agentstores check: {message}", file=sys.stderr)
    return CANNOT_RUN


def run(args: argparse.Namespace) -> int:
    """Run the suite and print the report; 0 all kept, 1 a promise failed (a method that
    raises ``NotImplementedError`` included), 2 the suite could not run."""
    problem = target_problem(args.url, args.factory)
    if problem is not None:
        return _fail(problem)
    try:
        from agentstores_contract import seeds, validate
        from agentstores_contract.profiles import PROFILES
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "agentstores_contract":
            raise
        print(INSTALL_HINT, file=sys.stderr)
        return CANNOT_RUN
    if args.profile is not None and args.profile not in PROFILES:
        return _fail(f"unknown profile {args.profile!r}; choose from {sorted(PROFILES)}")
    if args.seed is not None and args.seed < 0:
        return _fail(f"a seed is a non-negative integer, got {args.seed}")
    seed = args.seed if args.seed is not None else seeds.fresh()
    label = args.url or args.factory
    done = 0

    def start() -> None:
        print(f"checking {label} (profile {args.profile or 'ci'}, seed {seed})", flush=True)

    def progress(result: Any) -> None:
        nonlocal done
        done += 1
        detail = f"  {result.reason}" if result.outcome != "passed" and result.reason else ""
        if len(detail) > PROGRESS_WIDTH:
            detail = detail[: PROGRESS_WIDTH - 1] + "…"
        print(f"[{done:3}] {result.outcome.upper():<7} {result.name}{detail}", flush=True)

    report = validate(
        args.url,
        factory=args.factory,
        profile=args.profile,
        promises=args.promise,
        on_start=None if args.json else start,
        on_result=None if args.json else progress,
        seed=seed,
    )
    if args.json:
        print(report.to_json())
    elif report.error is not None and not report.tests:
        return _fail(report.error)
    else:
        print()
        print(report.table(width=120))
    if report.error is not None:
        return CANNOT_RUN
    return OK if report.ok else FOUND_PROBLEM
