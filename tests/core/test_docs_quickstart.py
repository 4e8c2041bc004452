"""The quickstart page and the READMEs' examples run as written.

Each ```python block of docs/quickstart.md is a whole script: it runs in a fresh
interpreter, in page order, in one temporary directory (so a block sees what the ones
before it stored in ``./.agentstores``). A block followed by "It prints:" and a ```text
block must print exactly that.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
READMES = [ROOT / "README.md", ROOT / "packages" / "agentstores" / "README.md"]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
PRINTS = "It prints:"
SCRIPT_TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    """One ```python block, where it starts, and the output the page promises for it."""

    code: str
    line: int
    expected: str | None


def python_blocks(markdown: str) -> list[Block]:
    """The page's python blocks in order, each with the ```text block that follows it
    after "It prints:" (None when the page promises no output)."""
    blocks: list[Block] = []
    last_end: int | None = None
    for match in FENCE.finditer(markdown):
        lang, body = match.group("lang"), match.group("body")
        if lang == "python":
            line = markdown.count("\n", 0, match.start()) + 1
            blocks.append(Block(body, line, None))
            last_end = match.end()
        elif lang == "text" and blocks and last_end is not None:
            if markdown[last_end : match.start()].strip() == PRINTS:
                blocks[-1] = Block(blocks[-1].code, blocks[-1].line, body)
            last_end = None
        else:
            last_end = None
    return blocks


def run_block(block: Block, cwd: Path, source: Path) -> None:
    """Run one block as ``python script.py`` in ``cwd``; fail naming its line on any error
    or on output other than the promised one."""
    script = cwd / f"block_{block.line}.py"
    script.write_text(block.code)
    env = {k: v for k, v in os.environ.items() if k != "AGENTSTORES_URL"}
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
    )
    where = f"{source.name}, the python block at line {block.line}"
    assert proc.returncode == 0, f"{where} failed:\n{proc.stderr}"
    if block.expected is not None:
        assert proc.stdout == block.expected, (
            f"{where} printed:\n{proc.stdout}\nthe page says:\n{block.expected}"
        )


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
    blocks = python_blocks(readme.read_text())
    assert blocks, f"{readme.name} lost its example"
    for block in blocks:
        run_block(block, tmp_path, readme)
