"""The ``agentstores`` command. Each of core's subcommands lives in its own module of this
package; a plugin adds its own through ``agentstores_register_commands``, using the exit
codes and help layout exported here so every subcommand reads alike."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from ..errors import UsageError
from ..plugins import get_registry
from ._exits import CANNOT_RUN, FOUND_PROBLEM, OK, TOP_EPILOG, HelpFormatter, epilog

SUBCOMMANDS = ("backends", "check", "schema")
"""Core's own subcommands, modules of this package; each defines ``register(subparsers)``
and sets a ``run`` default. Others come from plugins (``agentstores_register_commands``):
``bench`` and ``drill`` from ``agentstores-tools``."""

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """The ``agentstores`` parser: core's subcommands, then each plugin's (a plugin whose
    registration fails is logged and left out, like a plugin that fails to load)."""
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
    registry = get_registry()
    for impl in registry.manager.hook.agentstores_register_commands.get_hookimpls():
        try:
            impl.function(subparsers=sub)
        except Exception as exc:  # one broken plugin must not take the command down
            log.warning(
                "agentstores plugin %r could not add its commands: %s", impl.plugin_name, exc
            )
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


__all__ = [
    "CANNOT_RUN",
    "FOUND_PROBLEM",
    "OK",
    "SUBCOMMANDS",
    "HelpFormatter",
    "build_parser",
    "epilog",
    "main",
]


if __name__ == "__main__":
    sys.exit(main())
