"""Node and the project's npm packages (``web/package-lock.json``) for the tests that drive
the Vercel AI SDK from Node.

``npm ci`` installs into a cache directory named by the lockfile's hash, once: a warm run
costs a hash and a stat, a changed lockfile installs afresh beside the old one. Scripts
under ``web/`` are CommonJS and find the packages through ``NODE_PATH``, so nothing is
installed into the source tree. Node or npm missing is a failure with what to install,
never a skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "web"
"""The npm project: package.json, package-lock.json and the scripts the tests run."""
CACHE_ENV = "AGENTSTORES_NODE_CACHE"
"""Where installed trees are kept (default ``$XDG_CACHE_HOME/agentstores/node``)."""
NODE_MAJOR = 20
"""The oldest Node the pinned ``ai`` package supports (its ``engines``) and CI runs."""
INSTALL_TIMEOUT = 600


class NodeMissingError(RuntimeError):
    """Node or npm is not installed (or too old): the web tests cannot run."""


def _cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentstores" / "node"


def programs() -> tuple[str, str]:
    """The paths of node and npm; :class:`NodeMissingError` when either is missing or old."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise NodeMissingError(
            f"the web tests need Node {NODE_MAJOR}+ and npm on PATH (node: {node}, npm: {npm});"
            " install them (Debian: apt-get install nodejs npm, or NodeSource's nodejs)"
        )
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    if major < NODE_MAJOR:
        raise NodeMissingError(f"the web tests need Node {NODE_MAJOR}+, found {version.stdout}")
    return node, npm


def lock_key() -> str:
    """The hash of the lockfile (and package.json) that names the installed tree."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((PROJECT / name).read_bytes())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path``: two test sessions at once install only once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def node_modules() -> Path:
    """The installed ``node_modules`` for the current lockfile, installed now when missing
    (``npm ci``, which fails on a lockfile that does not match package.json)."""
    _node, npm = programs()
    tree = _cache_root() / lock_key()
    done = tree / "installed.json"
    with _locked(tree.with_suffix(".lock")):
        if done.exists():
            return tree / "node_modules"
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(PROJECT / name, tree / name)
        command = [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"]
        result = subprocess.run(
            command, cwd=tree, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
        if result.returncode != 0:
            raise RuntimeError(f"npm ci failed in {tree}:\n{result.stdout}\n{result.stderr}")
        done.write_text(json.dumps({"key": lock_key()}) + "\n")
    return tree / "node_modules"


def run_script(
    script: str, payload: dict[str, object], *, timeout: float = 120
) -> dict[str, object]:
    """Run ``web/<script>`` with ``payload`` as JSON on stdin; its last stdout line, parsed.

    Raises:
        AssertionError: the script failed (its output is in the message).
    """
    node, _npm = programs()
    env = dict(os.environ, NODE_PATH=str(node_modules()))
    result = subprocess.run(
        [node, str(PROJECT / script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=PROJECT,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"node {script} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise AssertionError(f"node {script} printed nothing:\n{result.stderr}")
    parsed: dict[str, object] = json.loads(lines[-1])
    return parsed
