"""Assemble the mutation workspace: the package source, the test command, the config.

The workspace keeps the mutation tool's results between runs, so a run only tests the
mutants of functions that changed since the last one, plus every earlier survivor (a
new contract test may kill it now). ``--fresh`` deletes the workspace first.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WORKSPACE = ROOT / ".mutation"
PACKAGE = ROOT / "packages" / "agentstores" / "src" / "agentstores"
SURVIVED = 0


def _sync_file(source: Path, target: Path) -> None:
    """Copy when the content differs; the fresh mtime marks the file for re-mutation."""
    if target.exists() and target.read_bytes() == source.read_bytes():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def _sync_tree(source: Path, target: Path) -> None:
    wanted = {
        path.relative_to(source)
        for path in source.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    for relative in sorted(wanted):
        _sync_file(source / relative, target / relative)
    if target.exists():
        for path in target.rglob("*"):
            if path.is_file() and path.relative_to(target) not in wanted:
                path.unlink()


def _retest_survivors(mutants: Path) -> int:
    """Mark every surviving mutant as not yet checked; return how many."""
    count = 0
    for meta in mutants.rglob("*.meta"):
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        survivors = [name for name, code in codes.items() if code == SURVIVED]
        for name in survivors:
            codes[name] = None
        if survivors:
            meta.write_text(json.dumps(data, indent=4))
            count += len(survivors)
    return count


def assemble(*, fresh: bool) -> Path:
    if fresh and WORKSPACE.exists():
        shutil.rmtree(WORKSPACE)
    _sync_tree(PACKAGE, WORKSPACE / "src" / "agentstores")
    _sync_file(HERE / "suite_under_mutation.py", WORKSPACE / "tests" / "test_contract.py")
    _sync_file(HERE / "mutmut.toml", WORKSPACE / "pyproject.toml")
    mutants = WORKSPACE / "mutants"
    if mutants.exists():
        print(f"re-testing {_retest_survivors(mutants)} earlier survivors")
    return WORKSPACE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fresh", action="store_true", help="delete earlier results first")
    args = parser.parse_args()
    print(f"mutation workspace: {assemble(fresh=args.fresh)}")


if __name__ == "__main__":
    main()
