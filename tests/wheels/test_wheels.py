"""The built wheels install into clean venvs and work: core alone, each adapter beside only
core. A file left out of a wheel, a missing entry point or a wrong dependency fails here.

The wheels come from the ``dist_dir`` fixture (conftest.py). PostgreSQL and Redis are
opened at ``$AGENTSTORES_TEST_POSTGRES_URL`` / ``$AGENTSTORES_TEST_REDIS_URL`` when set;
otherwise (and for MongoDB) their wheels are checked by import and ``agentstores backends``.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.wheels.distributions import Distribution
from tests.wheels.tools import run, uv

SMOKE = Path(__file__).with_name("smoke.py")
CORE = "packages/agentstores"


@dataclass(frozen=True)
class Case:
    """One clean venv: core's wheel, at most one other wheel, and what to check in it."""

    name: str
    distribution: str
    extra: str = ""
    scheme: str | None = None
    """The URL scheme ``agentstores backends`` must list (None: not a backend)."""
    env_url: str | None = None
    """The env variable naming a running server to open, for server backends."""


CASES = [
    Case("core", CORE, scheme="memory://"),
    Case("file", "packages/agentstores-file", scheme="file://"),
    Case(
        "postgres",
        "packages/agentstores-postgres",
        scheme="postgresql://",
        env_url="AGENTSTORES_TEST_POSTGRES_URL",
    ),
    Case(
        "redis",
        "packages/agentstores-redis",
        scheme="redis://",
        env_url="AGENTSTORES_TEST_REDIS_URL",
    ),
    Case(
        "redis-hiredis",
        "packages/agentstores-redis",
        extra="[hiredis]",
        scheme="redis://",
        env_url="AGENTSTORES_TEST_REDIS_URL",
    ),
    # MongoDB's wheel is checked by import and registration; tests-mongo opens it against
    # nx-27017 (this session installs no server).
    Case("mongo", "packages/agentstores-mongo", scheme="mongodb://"),
    Case("s3", "packages/agentstores-s3", scheme="s3://"),
    Case("contract", "contract_tests"),
]


def _wheel(dist_dir: Path, path: str) -> Path:
    wheel = dist_dir / Distribution.load(path).wheel_name
    assert wheel.exists(), f"{wheel.name} is not in {dist_dir}: build every distribution first"
    return wheel


def _venv(tmp_path: Path, dist_dir: Path, case: Case) -> Path:
    """A fresh venv on this interpreter holding core's wheel and the case's wheel."""
    venv = tmp_path / "venv"
    run(uv(), "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    wheels = {str(_wheel(dist_dir, CORE)), f"{_wheel(dist_dir, case.distribution)}{case.extra}"}
    run(uv(), "pip", "install", "--quiet", "--python", python, *sorted(wheels))
    run(uv(), "pip", "check", "--python", python)
    return python


def _open(python: Path, url: str, module: str, cwd: Path) -> None:
    out = json.loads(run(python, SMOKE, "open", url, module, cwd=cwd))
    assert out["contents"] == ["hi"]
    assert Path(out["module_file"]).is_relative_to(python.parent.parent), out["module_file"]


def _with_query(url: str, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_wheel_installs_and_works(tmp_path: Path, dist_dir: Path, case: Case) -> None:
    python = _venv(tmp_path, dist_dir, case)
    bindir = python.parent
    package = Distribution.load(case.distribution).package
    installed = run(python, "-c", f"import {package}; print({package}.__file__)").strip()
    assert Path(installed).is_relative_to(bindir.parent), f"{package} came from {installed}"
    if case.extra == "[hiredis]":
        run(python, "-c", "import hiredis")
    if case.scheme is not None:
        listed = run(bindir / "agentstores", "backends")
        assert f"[{case.scheme}" in listed or f" {case.scheme}" in listed, listed
    if case.name == "core":
        _open(python, "memory://wheels", "agentstores", tmp_path)
    elif case.name == "file":
        _open(python, f"file://{tmp_path / 'store'}", package, tmp_path)
    elif case.name == "contract":
        assert "--agentstores-url" in run(python, "-m", "pytest", "--help", cwd=tmp_path)
        checking = run(bindir / "agentstores", "check", "--help", cwd=tmp_path)
        assert "--accept-waivers" in checking, "the suite adds check to agentstores"
    elif case.env_url and os.environ.get(case.env_url):
        _open_server(python, os.environ[case.env_url], case, package, tmp_path)


def _open_server(python: Path, url: str, case: Case, package: str, cwd: Path) -> None:
    """Open a running server through the wheel: its packaged SQL or Lua must be there."""
    run_id = uuid.uuid4().hex[:12]
    if case.name == "postgres":
        schema = f"wheels_{run_id}"
        agentstores = python.parent / "agentstores"
        try:
            run(agentstores, "schema", "install", url, "--schema", schema, cwd=cwd)
            _open(python, _with_query(url, schema=schema), package, cwd)
        finally:
            run(python, SMOKE, "drop-schema", url, schema, cwd=cwd)
    else:
        prefix = f"wheels-{run_id}"
        try:
            _open(python, _with_query(url, key_prefix=prefix), package, cwd)
        finally:
            run(python, SMOKE, "drop-prefix", url, prefix, cwd=cwd)
