"""The docs page's example runs as written and prints what the page says."""

from __future__ import annotations

from pathlib import Path

from tests.docs_blocks import run_page

PAGE = Path(__file__).resolve().parents[2] / "docs" / "asgi.md"


def test_the_docs_page_runs(tmp_path: Path) -> None:
    assert run_page(PAGE, tmp_path) == 1
