"""The tools' one entry point in the ``agentstores`` group: adds ``agentstores bench`` and
``agentstores drill``. It registers no backend and imports neither command until the
command line is built, so loading the plugin registry (``open_stores`` does) stays cheap."""

from __future__ import annotations

import argparse

from agentstores.plugins import hookimpl


@hookimpl
def agentstores_register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``bench`` and ``drill`` to ``agentstores``."""
    from .cli import bench, drill

    bench.register(subparsers)
    drill.register(subparsers)
