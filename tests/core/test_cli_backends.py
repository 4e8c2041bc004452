"""``agentstores backends``: versions, schemes, capabilities, durability and failed plugins."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

from tests.core._support import run_python

CLI = "from agentstores.cli import main; raise SystemExit(main({args!r}))"


def test_json_lists_backends_with_versions_and_failures(plugin_dir: Path) -> None:
    out = run_python(CLI.format(args=["backends", "--json"]), path=plugin_dir)
    assert out.returncode == 1, out.stderr  # a plugin failed to load
    data = json.loads(out.stdout)
    by_name = {b["name"]: b for b in data["backends"]}
    memory = by_name["memory"]
    assert memory["version"] == importlib.metadata.version("agentstores")
    assert memory["schemes"] == ["memory"]
    assert memory["capabilities"] == ["settable_clock"]
    assert "lost" in memory["durability"]
    assert "bench_floor" not in memory  # tooling is agentstores-tools' business
    good = by_name["good"]
    assert good["distribution"] == "thirdparty-good" and good["version"] == "1.2.3"
    assert good["schemes"] == ["good", "good2"] and good["capabilities"] == ["durable"]
    assert good["durability"] == "test only"
    failed = {f["plugin"]: f["error"] for f in data["failed"]}
    assert {"broken", "misspelled", "wrongtype"} <= set(failed)
    assert "broken on purpose" in failed["broken"]


def test_text_output(plugin_dir: Path) -> None:
    out = run_python(CLI.format(args=["backends"]), path=plugin_dir)
    assert out.returncode == 1
    text = out.stdout
    assert "memory  [memory://]" in text
    assert "good  [good://, good2://]  thirdparty-good 1.2.3" in text
    assert "capabilities: durable" in text and "durability:   test only" in text
    failed_section = text.split("plugins that failed to load:", 1)[1]
    assert "broken: ImportError: this plugin is broken on purpose" in failed_section


def test_clean_exit_when_nothing_failed(plugin_dir: Path) -> None:
    out = run_python(
        CLI.format(args=["backends", "--json"]),
        path=plugin_dir,
        env={"AGENTSTORES_DISABLE_PLUGINS": "all"},
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [b["name"] for b in data["backends"]] == ["memory"] and data["failed"] == []
