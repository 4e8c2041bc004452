"""The ``agentstores`` command. Each subcommand lives in its own module of this package."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS = ("backends", "check", "drill", "bench", "schema")
"""Modules in this package; each defines ``register(subparsers)`` and sets a ``run`` default."""


def build_parser() -> argparse.ArgumentParser:
    """The ``agentstores`` parser, with a subcommand for each module of :data:`SUBCOMMANDS`
    that is present (an absent one is left out)."""
    parser = argparse.ArgumentParser(
        prog="agentstores", description="Storage adapters for AI-agent chat persistence."
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
    """Run the ``agentstores`` command line; return the subcommand's exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
