"""Helpers for core tests: throwaway plugin distributions and fresh-interpreter runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

PLUGINS: dict[str, str] = {
    # A working third-party backend whose factory module is imported only on open.
    "good_plugin": """
        from agentstores.plugins import BackendInfo, hookimpl

        @hookimpl
        def agentstores_backends():
            return [BackendInfo(name="good", schemes=("good", "good2"),
                                factory="good_factory:make", distribution="thirdparty-good",
                                capabilities=frozenset({"durable"}), durability="test only")]
    """,
    "good_factory": """
        from agentstores.memory.stores import MemoryStores

        def make(url, **options):
            return MemoryStores("memory://good-" + url.split("://", 1)[1], **options)
    """,
    "broken_plugin": """
        raise ImportError("this plugin is broken on purpose")
    """,
    "misspelled_plugin": """
        from agentstores.plugins import hookimpl

        @hookimpl
        def agentstores_backend():  # misspelled hook name
            return []
    """,
    "typo_plugin": """
        from agentstores.plugins import BackendInfo, hookimpl

        @hookimpl
        def agentstores_backends():
            return [BackendInfo(name="typo", schemes=("typo",), factory="good_factory:make",
                                capabilities=frozenset({"durabel"}))]
    """,
    "wrongtype_plugin": """
        from agentstores.plugins import hookimpl

        @hookimpl
        def agentstores_backends():
            return ["not a BackendInfo"]
    """,
}

ENTRY_POINTS = {
    "good": "good_plugin",
    "broken": "broken_plugin",
    "misspelled": "misspelled_plugin",
    "wrongtype": "wrongtype_plugin",
    "typo": "typo_plugin",
}


def make_plugin_dir(root: Path) -> Path:
    """A sys.path entry holding the plugin modules and a .dist-info declaring them."""
    for name, source in PLUGINS.items():
        (root / f"{name}.py").write_text(textwrap.dedent(source))
    info = root / "thirdparty_good-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-good\nVersion: 1.2.3\n")
    lines = ["[agentstores]"] + [f"{ep} = {mod}" for ep, mod in ENTRY_POINTS.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return root


def run_python(
    code: str, *, path: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (so sys.modules and the registry start empty)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTORES_")}
    if path is not None:
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(path), *filter(None, [full_env.get("PYTHONPATH")])]
        )
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def run_json(code: str, **kwargs: Any) -> Any:
    out = run_python(code, **kwargs)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
