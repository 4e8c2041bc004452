"""The suite's one entry point in the ``agentstores`` group: it adds ``agentstores check``.

Every registry build loads it (``agentstores backends``, any ``create_stores``), so it
imports nothing of the suite; the command's module loads when the parser is built, and
pytest, hypothesis and the tests only when the command runs.
"""

from __future__ import annotations

import argparse

from agentstores.plugins import hookimpl


@hookimpl
def agentstores_register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``agentstores check``."""
    from .cli import register

    register(subparsers)
