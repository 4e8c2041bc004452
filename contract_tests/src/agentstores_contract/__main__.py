"""``python -m agentstores_contract TARGET [--profile NAME] [--json] [--promise GLOB]``.

TARGET is a backend URL or a ``module:callable`` factory. Prints one line per promise as
results arrive, then the table (or the JSON report); exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import sys

from .profiles import PROFILES
from .validation import PromiseResult, validate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentstores_contract")
    parser.add_argument("target", help="backend URL or module:callable factory")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None)
    parser.add_argument("--json", action="store_true", help="print the JSON report only")
    parser.add_argument("--promise", action="append", default=[], metavar="GLOB")
    args = parser.parse_args(argv)

    def progress(result: PromiseResult) -> None:
        print(f"{result.outcome.upper():<7} {result.name}", file=sys.stderr, flush=True)

    report = validate(
        args.target,
        profile=args.profile,
        promises=args.promise,
        on_result=None if args.json else progress,
    )
    print(report.to_json() if args.json else report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
