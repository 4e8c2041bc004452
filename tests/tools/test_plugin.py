"""agentstores-tools adds ``bench`` and ``drill`` to ``agentstores`` through core's
``agentstores_register_commands`` hook: core names neither, the plugin is cheap to load,
and disabling it takes both away."""

from __future__ import annotations

import agentstores.cli
from tests.core._support import run_json, run_python

COMMANDS = "from agentstores.cli import build_parser; build_parser().parse_args(['--help'])"


def test_core_names_neither_tool() -> None:
    assert agentstores.cli.SUBCOMMANDS == ("backends", "check", "schema")


def test_the_plugin_adds_bench_and_drill() -> None:
    out = run_python(COMMANDS)
    assert "{backends,check,schema,bench,drill}" in out.stdout, out.stdout + out.stderr


def test_without_the_plugin_there_is_no_bench_or_drill() -> None:
    out = run_python(COMMANDS, env={"AGENTSTORES_DISABLE_PLUGINS": "tools"})
    assert "{backends,check,schema}" in out.stdout, out.stdout + out.stderr
    out = run_python(
        "from agentstores.cli import main; raise SystemExit(main(['drill']))",
        env={"AGENTSTORES_DISABLE_PLUGINS": "tools"},
    )
    assert out.returncode == 2 and "invalid choice: 'drill'" in out.stderr, out.stderr


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
