"""The README's ``pip install`` lines work as written, from a clone, in a clean venv."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.wheels.distributions import ROOT, Distribution
from tests.wheels.tools import constraints, run, uv

PLACEHOLDER = "your-backend"
"""The README's stand-in for the reader's own distribution: left out here."""


def _pip_lines() -> list[str]:
    lines = [
        line.strip()
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.strip().startswith("pip install ")
    ]
    assert len(lines) >= 3, "the README lost its install lines"
    return lines


def _args(line: str, dist_dir: Path) -> list[str]:
    """The line's pip arguments, with ``--find-links dist`` pointed at the built wheels."""
    args: list[str] = []
    for arg in shlex.split(line, comments=True)[2:]:
        if args and args[-1] == "--find-links":
            args.append(str(dist_dir))
        elif arg != PLACEHOLDER:
            args.append(arg)
    return args


def _named(args: list[str]) -> set[str]:
    """The distributions the arguments ask for: a path in the clone, or a name."""
    values = [a for prev, a in zip(["", *args[:-1]], args, strict=True) if prev != "--find-links"]
    names = [a for a in values if not a.startswith("-")]
    return {Distribution.load(a).name if (ROOT / a).is_dir() else a for a in names}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("line", _pip_lines())
def test_readme_pip_install_line_works(tmp_path: Path, dist_dir: Path, line: str) -> None:
    venv = tmp_path / "venv"
    run(uv(), "venv", "--quiet", "--seed", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    args = _args(line, dist_dir)
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run(*pip, *constraints(), *args, cwd=ROOT)
    listed = json.loads(run(python, "-m", "pip", "list", "--format=json", cwd=tmp_path))
    installed = {d["name"].lower() for d in listed}
    assert _named(args) <= installed, installed
    backends = run(venv / "bin" / "agentstores", "backends", cwd=tmp_path)
    for name in _named(args) - {"agentstores", "agentstores-contract"}:
        assert name in backends, backends
