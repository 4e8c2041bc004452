"""The line each mutant changes, read from the mutated files the mutation tool writes.

A mutated module holds, per function, the original (``<name>__mutmut_orig``) and every
mutant (``<name>__mutmut_<n>``) as plain definitions; diffing the two gives the change.
"""

from __future__ import annotations

import ast
import difflib
from pathlib import Path


def _functions(path: Path) -> dict[str, str]:
    source = path.read_text()
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in node.name:
            found[node.name] = "\n".join(lines[node.lineno - 1 : node.end_lineno])
    return found


def changes(mutants: Path, names: list[str]) -> dict[str, str]:
    """Mutant name (``package.module.function__mutmut_n``) -> ``- old / + new`` lines."""
    by_module: dict[str, list[str]] = {}
    for name in names:
        module = name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[0]
        by_module.setdefault(module, []).append(name)
    result: dict[str, str] = {}
    for module, members in by_module.items():
        path = mutants / "src" / Path(*module.split(".")).with_suffix(".py")
        if not path.exists():
            path = path.with_suffix("") / "__init__.py"
        functions = _functions(path)
        for name in members:
            function = name.rsplit(".", 1)[1]
            original = functions.get(function.rsplit("__mutmut_", 1)[0] + "__mutmut_orig", "")
            mutated = functions.get(function, "")
            lines = [
                line.strip()
                for line in difflib.unified_diff(
                    original.splitlines()[1:], mutated.splitlines()[1:], lineterm="", n=0
                )
                if line[:1] in "+-" and not line.startswith(("+++", "---"))
            ]
            result[name] = " / ".join(lines)
    return result
