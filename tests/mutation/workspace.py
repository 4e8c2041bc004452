"""Assemble the mutation workspace: the package source, the test command, the config.

The workspace keeps the mutation tool's results between runs, so a run only tests the
mutants of functions that changed since the last one, plus every earlier survivor (a
new contract test may kill it now). ``--fresh`` deletes the workspace first.

Two targets, each with a workspace of its own: ``core`` (the reference backend and the
protocol layer, against memory://) and ``file`` (the files adapter's Python, against
file://, core installed unmutated beside it).
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SURVIVED = 0


@dataclass(frozen=True)
class Target:
    """What one mutation run mutates, and with which test module and config."""

    name: str
    workspace: Path
    package: Path
    """The package's source folder, copied to ``src/<its name>`` in the workspace."""
    suite: Path
    """The test command's only module, copied to ``tests/test_contract.py``."""
    config: Path
    """The mutation tool's config, copied to ``pyproject.toml``."""
    undecorate: frozenset[str] = frozenset()
    """Decorators applied after the definition instead (``f = deco(f)``) in the copy:
    the mutation tool leaves a decorated function unmutated, and the files adapter's
    store methods are all ``@off_loop`` (its read-modify-write helpers
    ``@contextmanager``). The same function object results, so behaviour is unchanged."""
    import_time: frozenset[str] = frozenset()
    """Module-level functions that run only while the package is imported, left unmutated
    (a ``no mutate block`` pragma in the copy): the tool chooses the mutant at call time,
    after the import, so their mutants could never be active."""
    adapter_tests: tuple[Path, ...] = ()
    """The adapter's own test modules (with their package's ``__init__``, ``conftest`` and
    helpers) run beside the contract suite, copied to ``tests/adapter/``: the promises
    only that backend has (crash points, layout, permissions, I/O counts), each fast."""


TARGETS = {
    "core": Target(
        "core",
        ROOT / ".mutation",
        ROOT / "packages" / "agentstores" / "src" / "agentstores",
        HERE / "suite_under_mutation.py",
        HERE / "mutmut.toml",
    ),
    "file": Target(
        "file",
        ROOT / ".mutation-file",
        ROOT / "packages" / "agentstores-file" / "src" / "agentstores_file",
        HERE / "file_suite_under_mutation.py",
        HERE / "mutmut-file.toml",
        frozenset({"off_loop", "contextmanager"}),
        frozenset({"off_loop", "_make_encode", "_load_syncfs"}),
        tuple(
            ROOT / "tests" / "file" / name
            for name in (
                "__init__.py",
                "conftest.py",
                "_verify.py",
                "test_batch.py",
                "test_cost.py",
                "test_crash_points.py",
                "test_differential.py",
                "test_heartbeat_file.py",
                "test_layout.py",
                "test_locks.py",
                "test_oauth_files.py",
                "test_permissions.py",
            )
        ),
    ),
}
WORKSPACE = TARGETS["core"].workspace
PACKAGE = TARGETS["core"].package


def _sync_file(source: Path, target: Path, prepare: Target | None = None) -> bool:
    """Copy when the content differs (whether it did); the fresh mtime marks the file for
    re-mutation. ``prepare``: the target whose rewrites a Python file gets on its way."""
    content = source.read_bytes()
    if prepare is not None and source.suffix == ".py":
        text = undecorated(content.decode(), prepare.undecorate)
        content = unmutated(text, prepare.import_time).encode()
    if target.exists() and target.read_bytes() == content:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return True


def undecorated(source: str, names: frozenset[str]) -> str:
    """``source`` with every function decorated by exactly one of ``names`` (a bare name)
    defined undecorated and rebound right after its body: ``f = name(f)``, which is what
    the decorator line does. The decorator's line becomes a comment, so the function's
    lines keep their numbers."""
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        match node.decorator_list:
            case [ast.Name(id=name) as deco] if name in names:
                assert node.end_lineno is not None
                edits.append((deco.lineno, node.end_lineno, name, node.name))
    for deco_line, end, name, function in sorted(edits, reverse=True):
        indent = lines[deco_line - 1][
            : len(lines[deco_line - 1]) - len(lines[deco_line - 1].lstrip())
        ]
        lines.insert(end, f"{indent}{function} = {name}({function})\n")
        lines[deco_line - 1] = f"{indent}# @{name}: applied below\n"
    return "".join(lines)


def unmutated(source: str, names: frozenset[str]) -> str:
    """``source`` with the module-level functions ``names`` marked for the mutation tool to
    leave alone (the pragma ends the line of the signature's colon)."""
    lines = source.splitlines(keepends=True)
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            colon = node.body[0].lineno - 2
            assert lines[colon].rstrip().endswith(":"), (node.name, lines[colon])
            lines[colon] = lines[colon].rstrip() + "  # pragma: no mutate block\n"
    return "".join(lines)


def _sync_tree(source: Path, target: Path, prepare: Target | None = None) -> None:
    wanted = {
        path.relative_to(source)
        for path in source.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    for relative in sorted(wanted):
        _sync_file(source / relative, target / relative, prepare)
    if target.exists():
        for path in target.rglob("*"):
            if path.is_file() and path.relative_to(target) not in wanted:
                path.unlink()


NO_TESTS = (5, 33)
"""The mutation tool's exit codes for a mutant no test calls (a new test may call it)."""


def _retest_unkilled(mutants: Path) -> int:
    """Mark every surviving mutant, and every one no test called, as not yet checked;
    return how many."""
    count = 0
    for meta in mutants.rglob("*.meta"):
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        unkilled = [name for name, code in codes.items() if code in (SURVIVED, *NO_TESTS)]
        for name in unkilled:
            codes[name] = None
        if unkilled:
            meta.write_text(json.dumps(data, indent=4))
            count += len(unkilled)
    return count


def assemble(*, fresh: bool, target: Target = TARGETS["core"]) -> Path:
    workspace = target.workspace
    if fresh and workspace.exists():
        shutil.rmtree(workspace)
    _sync_tree(target.package, workspace / "src" / target.package.name, target)
    changed = _sync_file(target.suite, workspace / "tests" / "test_contract.py")
    adapter = workspace / "tests" / "adapter"
    wanted = {path.name for path in target.adapter_tests}
    for path in target.adapter_tests:
        changed = _sync_file(path, adapter / path.name) or changed
    if adapter.exists():
        for path in adapter.glob("*.py"):
            if path.name not in wanted:
                path.unlink()
    _sync_file(target.config, workspace / "pyproject.toml")
    mutants = workspace / "mutants"
    stats = mutants / "mutmut-stats.json"
    if changed and stats.exists():
        # The tool re-maps only tests it has not seen: a test that changed would keep
        # its old map of the functions it calls, and a mutant it now reaches survive.
        stats.unlink()
        print("the tests changed: which test calls which function is mapped anew")
    if mutants.exists():
        print(f"re-testing {_retest_unkilled(mutants)} earlier survivors and untested mutants")
    return workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fresh", action="store_true", help="delete earlier results first")
    parser.add_argument("--adapter", choices=sorted(TARGETS), default="core")
    args = parser.parse_args()
    print(f"mutation workspace: {assemble(fresh=args.fresh, target=TARGETS[args.adapter])}")


if __name__ == "__main__":
    main()
