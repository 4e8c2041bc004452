"""The server variants a test run covers, and the ones it cannot, named at its end.

A backend's tests run on every server variant this machine has: the private ones the
tests start from packages (always), the machine's own installed servers (PostgreSQL,
Redis) started privately from their programs, and external servers named by an env URL.
A variant this machine does not have is not a skipped test: it is left out of the
parameters, and :func:`not_run` records it so the run's summary names it, with why
(``run.py test`` repeats those lines at the very end).
"""

from __future__ import annotations

NOT_RUN_PREFIX = "agentstores: not run:"
"""How a line naming a variant that did not run begins (run.py looks for it)."""

_not_run: dict[str, str] = {}


def not_run(variant: str, reason: str) -> None:
    """Record that ``variant`` is not part of this run, and why."""
    _not_run[variant] = reason


def not_run_lines() -> list[str]:
    """One line per variant that did not run, in the order they were recorded."""
    return [f"{NOT_RUN_PREFIX} {variant} ({reason})" for variant, reason in _not_run.items()]


__all__ = ["NOT_RUN_PREFIX", "not_run", "not_run_lines"]
