"""The ``agentstores`` command. Each subcommand lives in its own module of this package."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import UsageError
from ._exits import CANNOT_RUN, TOP_EPILOG, HelpFormatter

SUBCOMMANDS = ("backends", "check", "drill", "bench", "schema")
"""Modules in this package; each defines ``register(subparsers)`` and sets a ``run`` default."""


def build_parser() -> argparse.ArgumentParser:
    """The ``agentstores`` parser, with a subcommand for each module of :data:`SUBCOMMANDS`
    that is present (an absent one is left out)."""
    parser = argparse.ArgumentParser(
        prog="agentstores",
        description="Storage adapters for AI-agent chat persistence.",
        epilog=TOP_EPILOG,
        formatter_class=HelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``agentstores`` command line; return the subcommand's exit code.

    A usage error a subcommand did not report itself is printed as one line and exits 2,
    like argparse's own.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except UsageError as exc:
        print(f"agentstores {args.command}: {exc}", file=sys.stderr)
        return CANNOT_RUN
    return code


if __name__ == "__main__":
    sys.exit(main())
