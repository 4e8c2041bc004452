"""``agentstores schema install URL``: create or migrate a backend's schema, as an admin.

Generic: it looks up the backend the URL's scheme names and runs that backend's
``BackendInfo.schema_installer`` (``async (url, *, schema, runtime_role) -> str``).
Backends without a schema (memory, files, Redis...) say so and exit 2, as does any error
the store raises (there is nothing it could find wrong, so no exit 1). Running it again
migrates an existing schema forward; the adapter itself never runs DDL.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from typing import Any

from ..errors import AgentStoresError, UsageError
from ..plugins import get_registry, scheme_of, unknown_scheme
from ._exits import CANNOT_RUN, OK, HelpFormatter, epilog

EPILOG = epilog(
    "the schema is installed (or migrated) and the role granted",
    None,
    "usage error, or the install could not run (no installed backend for the URL, a "
    "backend without a schema, the server unreachable or refusing: the line says why)",
)


def register(subparsers: Any) -> None:
    """Add the ``schema install`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "schema",
        help="install or migrate a backend's schema (run as an administrator)",
        description=(
            "Create the tables a backend needs, record the schema version, and grant a "
            "runtime role exactly what the adapter uses. Re-running migrates forward."
        ),
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    actions = p.add_subparsers(dest="action", required=True)
    install = actions.add_parser(
        "install",
        help="create or migrate the schema and grant the runtime role",
        description="Create or migrate the schema at URL and grant the runtime role.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    install.add_argument("url", help="an administrator's URL, e.g. postgresql://admin@db/app")
    install.add_argument(
        "--schema", default=None, help="schema/namespace to install into (backend default)"
    )
    install.add_argument(
        "--runtime-role",
        default=None,
        help="the role the application connects as; granted only what the adapter uses",
    )
    install.set_defaults(run=run_install)


def _installer(url: str) -> Any:
    scheme = scheme_of(url)
    registry = get_registry()
    info = registry.by_scheme(scheme)
    if info is None:
        raise UsageError(unknown_scheme(scheme, registry))
    if info.schema_installer is None:
        raise UsageError(f"the {info.name} backend has no schema to install")
    module_name, _, attr = info.schema_installer.partition(":")
    if not module_name or not attr:
        raise UsageError(
            f"{info.name}: schema_installer must look like 'module:callable', "
            f"got {info.schema_installer!r}"
        )
    return getattr(importlib.import_module(module_name), attr)


def run_install(args: argparse.Namespace) -> int:
    """Run the installer of the backend ``args.url`` names and print its summary; exit 2
    when it could not (no such backend, it has no schema, or the store refused)."""
    try:
        installer = _installer(args.url)
        summary = asyncio.run(
            installer(args.url, schema=args.schema, runtime_role=args.runtime_role)
        )
    except AgentStoresError as exc:
        print(f"agentstores schema install: {exc}", file=sys.stderr)
        return CANNOT_RUN
    print(summary)
    return OK
