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

SUBCOMMANDS = ("backends", "schema")
"""Core's own subcommands, modules of this package; each defines ``register(subparsers)``
and sets a ``run`` default. Others come from plugins (``agentstores_register_commands``):
``check`` from ``agentstores-contract``, ``bench`` and ``drill`` from ``agentstores-tools``."""
ELSEWHERE = {
    "check": "agentstores-contract",
    "bench": "agentstores-tools",
    "drill": "agentstores-tools",
}
"""Subcommands that other distributions add, each with its distribution: when that is not
installed, the command is still there and says what to install."""

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
        importlib.import_module(f"{__name__}.{name}").register(sub)
    registry = get_registry()
    for impl in registry.manager.hook.agentstores_register_commands.get_hookimpls():
        try:
            impl.function(subparsers=sub)
        except Exception as exc:  # one broken plugin must not take the command down
            log.warning(
                "agentstores plugin %r could not add its commands: %s", impl.plugin_name, exc
            )
    for name, distribution in ELSEWHERE.items():
        if name not in sub.choices:
            _not_installed(sub, name, distribution)
    return parser


def _not_installed(subparsers: argparse._SubParsersAction, name: str, distribution: str) -> None:  # type: ignore[type-arg]
    """A stand-in for a plugin's command that says what to install. Every word after the
    name is taken as it is (no word starts with its prefix character), ``--json`` too."""
    p = subparsers.add_parser(
        name, help=f"(not installed: pip install {distribution})", add_help=False, prefix_chars="\0"
    )
    p.add_argument("words", nargs="*")

    def run(args: argparse.Namespace) -> int:
        print(
            f"agentstores {name} comes with {distribution}, which is not installed; "
            f"install it with: pip install {distribution}",
            file=sys.stderr,
        )
        return CANNOT_RUN

    p.set_defaults(run=run)


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
