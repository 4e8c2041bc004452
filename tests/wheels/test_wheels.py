"""The built wheels install into clean venvs and work: core alone, each adapter beside only
core. A file left out of a wheel, a missing entry point or a wrong dependency fails here.
``agentstores bench`` and ``agentstores drill`` exist only beside agentstores-tools.

The wheels come from the ``dist_dir`` fixture (conftest.py), their dependencies at the
versions uv.lock pins (``constraints``). PostgreSQL and Redis are opened at
``$AGENTSTORES_TEST_POSTGRES_URL`` / ``$AGENTSTORES_TEST_REDIS_URL`` when set, else on a
private PostgreSQL 18 and Valkey 9 started here; MongoDB's and S3's wheels are checked by
import and ``agentstores backends`` (their sessions open them on nx-27017 and moto).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers.postgres import EmbeddedPostgres
from tests.servers.valkey import ValkeyServer
from tests.wheels.distributions import Distribution
from tests.wheels.tools import constraints, run, uv

SMOKE = Path(__file__).with_name("smoke.py")
BRIDGES = Path(__file__).with_name("bridges")
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
    bridge: str | None = None
    """A script under ``bridges/``, run in the venv: it uses a framework bridge through the
    framework's own API (or the web app as a plain ASGI application) over memory:// and
    exits 0."""


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
    Case("tools", "packages/agentstores-tools"),
    Case("openai-agents", "packages/agentstores-openai-agents", bridge="openai_agents.py"),
    Case("adk", "packages/agentstores-adk", bridge="adk.py"),
    Case("pydantic-ai", "packages/agentstores-pydantic-ai", bridge="pydantic_ai.py"),
    Case("asgi", "packages/agentstores-asgi", bridge="asgi.py"),
]
TOOLING_COMMANDS = ("bench", "drill")
"""The subcommands agentstores-tools adds: absent with core alone, present beside it."""


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
    run(uv(), "pip", "install", "--quiet", "--python", python, *constraints(), *sorted(wheels))
    run(uv(), "pip", "check", "--python", python)
    return python


def _open(python: Path, url: str, module: str, cwd: Path) -> None:
    out = json.loads(run(python, SMOKE, "open", url, module, cwd=cwd))
    assert out["contents"] == ["hi"]
    assert Path(out["module_file"]).is_relative_to(python.parent.parent), out["module_file"]


def _with_query(url: str, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, str]]:
    """A running server's URL per backend case: the env URL, else a private one started
    on first use (a superuser's URL for PostgreSQL)."""
    with contextlib.ExitStack() as stack:

        class Lazy(dict[str, str]):
            def __missing__(self, name: str) -> str:
                case = next(c for c in CASES if c.name == name)
                url = os.environ.get(case.env_url or "")
                if not url and case.name == "postgres":
                    url = stack.enter_context(EmbeddedPostgres()).url
                elif not url:
                    url = stack.enter_context(ValkeyServer()).url
                self[name] = url
                return url

        yield Lazy()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_wheel_installs_and_works(
    tmp_path: Path, dist_dir: Path, case: Case, servers: dict[str, str]
) -> None:
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
    if case.name != "tools":  # no tooling in the wheel: the commands only say what to install
        for command in TOOLING_COMMANDS:
            stand_in = subprocess.run(
                [bindir / "agentstores", command, "--help"], capture_output=True, text=True
            )
            assert stand_in.returncode == 2, stand_in
            assert "pip install agentstores-tools" in stand_in.stderr, stand_in
    if case.name == "core":
        _open(python, "memory://wheels", "agentstores", tmp_path)
    elif case.name == "tools":
        _bench_and_drill(bindir / "agentstores", tmp_path)
    elif case.name == "file":
        _open(python, f"file://{tmp_path / 'store'}", package, tmp_path)
    elif case.name == "contract":
        assert "--agentstores-url" in run(python, "-m", "pytest", "--help", cwd=tmp_path)
        checking = run(bindir / "agentstores", "check", "--help", cwd=tmp_path)
        assert "--accept-waivers" in checking, "the suite adds check to agentstores"
    elif case.bridge is not None:
        run(python, BRIDGES / case.bridge, cwd=tmp_path)
    elif case.env_url:
        server = "postgres" if case.name == "postgres" else "redis"
        _open_server(python, servers[server], case, package, tmp_path)


def _bench_and_drill(agentstores: Path, cwd: Path) -> None:
    """Both tools run from the installed wheel: a tiny bench of memory:// beside its
    floor (the floor modules are in the wheel), and the drill's help."""
    for command in TOOLING_COMMANDS:
        assert "exit codes" in run(agentstores, command, "--help", cwd=cwd)
    tiny = ["--clients", "1", "--seconds", "0.1", "--warmup", "0.01", "--rounds", "1"]
    tiny += ["--ops", "cas", "--lengths", "none", "--json", "--quiet"]
    out = json.loads(run(agentstores, "bench", "--url", "memory://wheels", *tiny, cwd=cwd))
    (result,) = out["runs"]
    assert result["backend"] == "memory" and result["floor"]["cas"]["ops"] > 0, result


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
