"""Run a page's python examples as written: the quickstart's, the READMEs' and each bridge's
docs page's.

Each ```python block is a whole script, run in a fresh interpreter. A block followed by
"It prints:" and a ```text block must print exactly that.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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


def run_page(page: Path, cwd: Path) -> int:
    """Run every python block of ``page`` in order in ``cwd``; returns how many ran."""
    blocks = python_blocks(page.read_text())
    for block in blocks:
        run_block(block, cwd, page)
    return len(blocks)
