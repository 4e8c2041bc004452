#!/usr/bin/env python3
"""Set up and run agentstores from a fresh clone, with nothing but Python 3.11+.

    python3 run.py drill     the main job: a kill-and-resume drill on the embedded file backend
    python3 run.py test      the whole test suite (every backend; servers start themselves)
    python3 run.py nox ARGS  any other nox session (lint, typecheck, bench, deep, ...)

The first call creates ``.venv`` beside this file and installs what the command needs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
TOOLS = ["uv>=0.5", "nox>=2024.10"]
LOCAL = ["packages/agentstores", "packages/agentstores-file", "contract_tests"]


def ensure_venv() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - run.py may be started by an older python3
        sys.exit("agentstores needs Python 3.11 or newer")
    if not (BIN / "python").exists():
        print(f"creating {VENV} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / ".agentstores-setup"
    wanted = "\n".join(TOOLS + LOCAL)
    if stamp.exists() and stamp.read_text() == wanted:
        return
    pip = [str(BIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *TOOLS], check=True)
    editable = [arg for path in LOCAL for arg in ("-e", str(ROOT / path))]
    uv = [str(BIN / "uv"), "pip", "install", "--quiet", "--python", str(BIN / "python")]
    subprocess.run([*uv, *editable], check=True)
    stamp.write_text(wanted)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0
    ensure_venv()
    command, rest = argv[0], argv[1:]
    if command == "drill":
        args = [str(BIN / "agentstores"), "drill", *rest]
    elif command == "test":
        args = [str(BIN / "nox"), "-t", "tests", *rest]
    elif command == "nox":
        args = [str(BIN / "nox"), *rest]
    else:
        args = [str(BIN / "agentstores"), command, *rest]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.call(args, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
