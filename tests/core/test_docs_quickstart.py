"""The quickstart page and the READMEs' examples run as written.

Each ```python block of docs/quickstart.md is a whole script: it runs in a fresh
interpreter, in page order, in one temporary directory (so a block sees what the ones
before it stored in ``./.agentstores``). A block followed by "It prints:" and a ```text
block must print exactly that.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_blocks import Block, python_blocks, run_block, run_page

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
READMES = [ROOT / "README.md", ROOT / "packages" / "agentstores" / "README.md"]


def test_the_extractor_pairs_code_with_its_promised_output() -> None:
    page = (
        "```python\nprint(1)\n```\n\nIt prints:\n\n```text\n1\n```\n\n"
        "```python\nprint(2)\n```\n\nsome prose\n\n```text\n2\n```\n"
    )
    assert python_blocks(page) == [Block("print(1)\n", 1, "1\n"), Block("print(2)\n", 11, None)]


def test_a_block_that_prints_otherwise_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="the page says"):
        run_block(Block("print('no')\n", 1, "yes\n"), tmp_path, QUICKSTART)
    with pytest.raises(AssertionError, match="failed"):
        run_block(Block("raise SystemExit(3)\n", 1, None), tmp_path, QUICKSTART)


def test_quickstart_blocks_run_in_order(tmp_path: Path) -> None:
    blocks = python_blocks(QUICKSTART.read_text())
    assert len(blocks) >= 4, "the quickstart lost its examples"
    assert all(b.expected is not None for b in blocks), "every quickstart block shows its output"
    for block in blocks:
        assert "asyncio.run(main())" in block.code, f"line {block.line}: not a whole script"
        run_block(block, tmp_path, QUICKSTART)


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_readme_examples_run(readme: Path, tmp_path: Path) -> None:
    assert run_page(readme, tmp_path), f"{readme.name} lost its example"
