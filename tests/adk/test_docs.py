"""docs/adk.md's example runs as written and prints what the page says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_blocks import run_page

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(180)


def test_docs_page_runs(tmp_path: Path) -> None:
    assert run_page(ROOT / "docs" / "adk.md", tmp_path) == 1
