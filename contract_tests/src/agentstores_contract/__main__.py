"""``python -m agentstores_contract (URL | --factory MODULE:CALLABLE) [--profile NAME] ...``.

Prints one line per promise as results arrive, then the table (or the JSON report);
exits 0 when every promise is kept, 1 on any failure, 2 when the suite could not run.
"""

from __future__ import annotations

import argparse
import sys

from .profiles import PROFILES
from .validation import PromiseResult, validate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentstores_contract")
    parser.add_argument("url", nargs="?", help="backend URL (scheme://...)")
    parser.add_argument(
        "--factory", metavar="MODULE:CALLABLE", help="the backend this callable makes"
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None)
    parser.add_argument("--json", action="store_true", help="print the JSON report only")
    parser.add_argument("--promise", action="append", default=[], metavar="GLOB")
    args = parser.parse_args(argv)
    if (args.url is None) == (args.factory is None):
        parser.error("give a backend URL (scheme://...) or --factory module:callable")
    if args.url is not None and "://" not in args.url:
        parser.error(f"{args.url!r} is not a backend URL; give scheme://... or --factory")

    def progress(result: PromiseResult) -> None:
        print(f"{result.outcome.upper():<7} {result.name}", file=sys.stderr, flush=True)

    report = validate(
        args.url,
        factory=args.factory,
        profile=args.profile,
        promises=args.promise,
        on_result=None if args.json else progress,
    )
    print(report.to_json() if args.json else report.table())
    if report.error is not None:
        return 2
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
