"""MkDocs hook: replace ``<!-- agentstores-help SUBCOMMAND... -->`` with that command's
``--help`` text, taken from the installed CLI at build time, so the CLI page cannot drift
from the parser."""

from __future__ import annotations

import contextlib
import io
import os
import re
from typing import Any

MARKER = re.compile(r"^<!-- agentstores-help(?P<args>(?: [a-z-]+)*) -->$", re.MULTILINE)
WIDTH = "78"


def help_text(args: list[str]) -> str:
    """What ``agentstores ARGS --help`` prints, at a fixed width."""
    from agentstores.cli import build_parser

    out = io.StringIO()
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            build_parser().parse_args([*args, "--help"])
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    text = out.getvalue().rstrip()
    if not text.startswith("usage:"):
        raise ValueError(f"agentstores {' '.join(args)} --help printed no usage: {text!r}")
    return text


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Expand every help marker of a page into a text block."""

    def expand(match: re.Match[str]) -> str:
        args = match.group("args").split()
        return f"```text\n$ agentstores {' '.join([*args, '--help'])}\n{help_text(args)}\n```"

    return MARKER.sub(expand, markdown)
