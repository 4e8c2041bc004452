"""``bench`` and ``drill`` never show a URL's password: not in their output, not in the
errors they print (even when a backend's own error carries the URL), not in a worker's
command line. A third-party backend here puts the whole URL in its errors, as a careless
adapter would; the tools must mask it anyway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentstores.urls import redact_url
from tests.tools.leaks import PASSWORD, ChildCommandLines

PLUGIN = """
    from agentstores.plugins import BackendInfo, hookimpl

    @hookimpl
    def agentstores_backends():
        return [BackendInfo(name="leaky", schemes=("leaky",), factory="leaky_factory:make",
                            capabilities=frozenset({"multi_process"}))]
"""
FACTORY = """
    import sys

    from agentstores.errors import BackendUnavailableError
    from agentstores_file.stores import FileStores

    def make(url, **options):
        # leaky://user:password@host/... names a server that is never there; with no
        # host, the path after "@" is a file store the drill's runner opens, and its
        # worker processes fail to open, each error naming the whole URL.
        where = url.split("@", 1)[1]
        if not where.startswith("/") or sys.argv[0].endswith("worker.py"):
            raise BackendUnavailableError(f"cannot reach {url}: connection refused")
        return FileStores("file://" + where, **options)
"""


@pytest.fixture
def leaky(tmp_path: Path) -> dict[str, str]:
    """The environment of a process in which the ``leaky://`` backend is installed."""
    root = tmp_path / "plugin"
    root.mkdir()
    (root / "leaky_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (root / "leaky_factory.py").write_text(textwrap.dedent(FACTORY))
    info = root / "leaky-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: leaky\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[agentstores]\nleaky = leaky_plugin\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTORES_")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    return env


def agentstores(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``agentstores ARGS`` in a fresh interpreter with ``env``."""
    code = f"from agentstores.cli import main; raise SystemExit(main({list(args)!r}))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240
    )


def test_bench_masks_the_password_in_its_progress_and_a_backend_error(
    leaky: dict[str, str],
) -> None:
    url = f"leaky://app:{PASSWORD}@db.invalid/agents"
    out = agentstores(leaky, "bench", "--url", url, "--clients", "1", "--seconds", "0.1")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "cannot reach" in out.stderr, out.stderr
    assert PASSWORD not in out.stdout + out.stderr
    assert redact_url(url) in out.stderr  # still says which server it could not reach


def test_drill_masks_the_password_in_an_opening_error(leaky: dict[str, str]) -> None:
    url = f"leaky://app:{PASSWORD}@db.invalid/agents"
    out = agentstores(leaky, "drill", url, "--fast")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "cannot reach" in out.stderr, out.stderr
    assert PASSWORD not in out.stdout + out.stderr
    assert redact_url(url) in out.stderr


def test_drill_masks_the_password_in_what_its_workers_report(
    leaky: dict[str, str], tmp_path: Path
) -> None:
    """The workers fail to open the store, each error naming the URL: the report (text
    and JSON) says they failed, never with the password; their command lines never
    held it."""
    url = f"leaky://app:{PASSWORD}@{tmp_path / 'store'}"
    report = tmp_path / "drill.json"
    with ChildCommandLines() as seen:
        out = agentstores(leaky, "drill", url, "--fast", "--rounds", "kill", "--json", str(report))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "cannot reach" in out.stdout, out.stdout
    assert PASSWORD not in out.stdout + out.stderr
    data = json.loads(report.read_text())
    assert "cannot reach" in data["error"] and PASSWORD not in json.dumps(data)
    workers = [line for line in seen.lines if "drill.worker" in line]
    assert workers, seen.lines
    assert not [line for line in workers if PASSWORD in line], workers
