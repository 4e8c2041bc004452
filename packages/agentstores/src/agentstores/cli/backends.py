"""``agentstores backends``: what is installed, what each backend offers, what failed to load."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from typing import Any

from ..plugins import BackendInfo, get_registry
from ._exits import FOUND_PROBLEM, OK, HelpFormatter, epilog


def register(subparsers: Any) -> None:
    """Add the ``backends`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "backends",
        help="list installed backends and plugins that failed to load",
        description=(
            "Installed backends with their distribution version, URL schemes, capabilities "
            "and durability, and every plugin that failed to load. Imports no driver."
        ),
        epilog=epilog(
            "the list printed, every plugin loaded",
            "a plugin failed to load (the list names it and why)",
            "usage error",
        ),
        formatter_class=HelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


def _version(distribution: str | None) -> str | None:
    if not distribution:
        return None
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe(info: BackendInfo) -> dict[str, Any]:
    """JSON-safe view of one backend."""
    return {
        "name": info.name,
        "distribution": info.distribution,
        "version": _version(info.distribution),
        "schemes": list(info.schemes),
        "capabilities": sorted(info.capabilities),
        "durability": info.durability,
        "description": info.description,
        "schema_installer": info.schema_installer is not None,
    }


def collect() -> dict[str, Any]:
    """Every installed backend described, and every plugin that failed to load."""
    registry = get_registry()
    return {
        "backends": [describe(registry.backends[n]) for n in sorted(registry.backends)],
        "failed": [{"plugin": f.entry_point, "error": f.error} for f in registry.failures],
    }


def run(args: argparse.Namespace) -> int:
    """Print the installed backends, as text or JSON; exit 1 when a plugin failed to load."""
    data = collect()
    code = FOUND_PROBLEM if data["failed"] else OK
    if args.json:
        print(json.dumps(data, indent=2))
        return code
    out: list[str] = []
    for b in data["backends"]:
        schemes = ", ".join(f"{s}://" for s in b["schemes"])
        dist = f"{b['distribution'] or '?'} {b['version'] or '(version unknown)'}"
        out.append(f"{b['name']}  [{schemes}]  {dist}")
        if b["description"]:
            out.append(f"  {b['description']}")
        out.append(f"  capabilities: {', '.join(b['capabilities']) or 'none'}")
        out.append(f"  durability:   {b['durability'] or 'not stated'}")
    if not data["backends"]:
        out.append("no backends installed")
    if data["failed"]:
        out.append("")
        out.append("plugins that failed to load:")
        out += [f"  {f['plugin']}: {f['error']}" for f in data["failed"]]
    print("\n".join(out))
    sys.stdout.flush()
    return code
