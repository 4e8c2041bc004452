"""The exit codes every ``agentstores`` subcommand uses, and the help text stating them."""

from __future__ import annotations

import argparse
import textwrap

OK = 0
"""The command ran and found nothing wrong."""
FOUND_PROBLEM = 1
"""The command ran and found a problem: a promise failed, the drill lost a message..."""
CANNOT_RUN = 2
"""A usage error, or the command could not run: a bad URL or option, an unreachable
backend, a package that is not installed. argparse's own errors exit 2 as well."""


def epilog(ok: str, problem: str | None, cannot_run: str) -> str:
    """The ``exit codes:`` block of a subcommand's ``--help``; ``problem`` is None for a
    command that has nothing to find (it only succeeds or cannot run)."""
    entries = [(OK, ok), (FOUND_PROBLEM, problem), (CANNOT_RUN, cannot_run)]
    lines = ["exit codes:"]
    for code, meaning in entries:
        if meaning is not None:
            lines += textwrap.wrap(
                meaning, 78, initial_indent=f"  {code}  ", subsequent_indent=" " * 5
            )
    return "\n".join(lines)


TOP_EPILOG = epilog(
    "success",
    "the command ran and found a problem (a promise failed, the drill lost a message, a "
    "benchmark operation errored, a plugin failed to load)",
    "usage error, or the command could not run (bad URL or option, backend unreachable, "
    "a needed package not installed)",
)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the exit-code epilog's lines as written (descriptions are wrapped as usual)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("exit codes"):
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


class DefaultsHelpFormatter(HelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """:class:`HelpFormatter` that also shows every option's default."""
