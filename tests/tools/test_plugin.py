"""agentstores-tools adds ``bench`` and ``drill`` to ``agentstores`` through core's
``agentstores_register_commands`` hook: core implements neither, the plugin is cheap to
load, and without it both only say what to install."""

from __future__ import annotations

import agentstores.cli
from tests.core._support import run_json, run_python

COMMANDS = "from agentstores.cli import build_parser; build_parser().parse_args(['--help'])"


def test_core_names_neither_tool() -> None:
    assert agentstores.cli.SUBCOMMANDS == ("backends", "schema")


def test_the_plugin_adds_bench_and_drill() -> None:
    out = run_python(COMMANDS)
    assert "{backends,schema,check,bench,drill}" in out.stdout, out.stdout + out.stderr
    assert "(not installed:" not in out.stdout, out.stdout


def test_without_the_plugin_bench_and_drill_only_say_what_to_install() -> None:
    out = run_python(COMMANDS, env={"AGENTSTORES_DISABLE_PLUGINS": "tools"})
    assert "(not installed: pip install agentstores-tools)" in out.stdout, out.stdout
    out = run_python(
        "from agentstores.cli import main; raise SystemExit(main(['drill']))",
        env={"AGENTSTORES_DISABLE_PLUGINS": "tools"},
    )
    assert out.returncode == 2, out.stderr
    assert "pip install agentstores-tools" in out.stderr, out.stderr


def test_loading_the_registry_imports_no_tool() -> None:
    """``open_stores`` builds the registry, which loads every plugin: the tools' plugin
    must not import the bench or the drill there."""
    loaded = run_json(
        """
        import json, sys
        from agentstores.plugins import get_registry
        registry = get_registry()
        assert registry.manager.has_plugin("tools"), registry.failures
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("agentstores_tools"))))
        """
    )
    assert loaded == ["agentstores_tools", "agentstores_tools.plugin"]
