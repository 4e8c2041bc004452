"""Commands the wheel tests run: uv, and any command that must succeed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def uv() -> str:
    """The uv binary: on PATH (the nox session's bin), else the uv distribution's own."""
    found = shutil.which("uv")
    if found is None:
        from uv import find_uv_bin

        found = find_uv_bin()
    return found


CONSTRAINTS_ENV = "AGENTSTORES_CONSTRAINTS"
"""A requirements file of uv.lock's pins (the tests-wheels session exports it)."""


def constraints() -> list[str]:
    """``-c FILE`` holding the lock's pins when the session named one: a clean venv then
    gets the dependency versions every other session tests, not what the index serves
    today."""
    path = os.environ.get(CONSTRAINTS_ENV)
    return ["--constraint", path] if path else []


def run(*args: str | Path, cwd: Path | None = None) -> str:
    """Run a command that must succeed; its stdout, or a failure showing both streams."""
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout
