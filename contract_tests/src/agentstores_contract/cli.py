"""``agentstores check URL``: run the contract suite against a backend and report per promise.

The suite adds this subcommand to ``agentstores`` through the core's plugin hook
(see :mod:`.plugin`); ``python -m agentstores_contract`` runs the same command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agentstores.cli import CANNOT_RUN, FOUND_PROBLEM, OK, HelpFormatter, epilog
from agentstores.errors import UsageError
from agentstores.urls import redact_url

TWO_FORMS = (
    "give a backend URL (scheme://..., e.g. postgresql://user@host/db, "
    "file://./.agentstores, memory://) or --factory module:callable"
)
PROGRESS_WIDTH = 160
"""Characters of a failure's reason on its progress line; the table ends with it in full."""
DESCRIPTION = (
    "Runs every contract promise against the backend URL names (it must be reachable and "
    "writable: tests write under fresh random tenants). The backend is opened once first: "
    "when that fails, the one line saying why is all it prints. Then a line per promise "
    "as results arrive, then a table. A password in the URL is shown as ***."
)
EPILOG = epilog(
    "every promise kept (or skipped for a capability the backend does not declare; "
    "waived ones too with --accept-waivers)",
    "a promise failed (a method that raises NotImplementedError included), a waiver was "
    "not needed, or a promise was waived and --accept-waivers not given",
    "usage error, or the suite could not run (backend unreachable, unknown URL option or "
    "scheme, unknown promise waived)",
)


def register(subparsers: Any) -> None:
    """Add the ``check`` subcommand to the ``agentstores`` parser."""
    p = subparsers.add_parser(
        "check",
        help="run the contract suite against a backend URL",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    add_arguments(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments, and ``run`` as what it does."""
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
    p.add_argument(
        "--waive",
        action="append",
        default=[],
        metavar="PROMISE=REASON",
        help="the backend does not keep this promise, for this reason: its tests still "
        "run, and it is reported waived, never passed (repeatable)",
    )
    p.add_argument(
        "--accept-waivers",
        action="store_true",
        help="exit 0 although promises were waived (a waiver no test needed still fails)",
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
    """Run the suite and print the report; 0 all kept, 1 a promise failed or was waived
    (unless ``--accept-waivers``), 2 the suite could not run."""
    from . import seeds, validate, waivers
    from .profiles import PROFILES

    problem = target_problem(args.url, args.factory)
    if problem is not None:
        return _fail(problem)
    if args.profile is not None and args.profile not in PROFILES:
        return _fail(f"unknown profile {args.profile!r}; choose from {sorted(PROFILES)}")
    if args.seed is not None and args.seed < 0:
        return _fail(f"a seed is a non-negative integer, got {args.seed}")
    try:
        waive = waivers.checked(dict(waivers.parse(text) for text in args.waive))
    except UsageError as exc:
        return _fail(f"--waive: {exc}")
    seed = args.seed if args.seed is not None else seeds.fresh()
    label = redact_url(args.url) if args.url else args.factory
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
        waive=waive,
    )
    if args.json:
        print(report.to_json())
    elif report.error is not None and not report.tests:
        return _fail(report.error)
    else:
        print()
        print(report.table(width=120))
        if report.waived and not args.accept_waivers:
            print(f"{len(report.waived)} promise(s) waived: exit 1 (--accept-waivers: exit 0)")
    if report.error is not None:
        return CANNOT_RUN
    if report.ok or (args.accept_waivers and report.ok_with_waivers):
        return OK
    return FOUND_PROBLEM


def main(argv: list[str] | None = None) -> int:
    """``python -m agentstores_contract``: the ``check`` command on its own."""
    parser = argparse.ArgumentParser(
        prog="python -m agentstores_contract",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code
