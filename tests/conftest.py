"""Hooks every test session of the project shares."""

from __future__ import annotations

import pytest

from tests.servers.variants import not_run_lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the server variants this run could not cover (see tests/servers/variants.py)."""
    lines = not_run_lines()
    if lines:
        terminalreporter.section("server variants not run")
        for line in lines:
            terminalreporter.write_line(line)
