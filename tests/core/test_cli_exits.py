"""Every ``agentstores`` subcommand states its exit codes in ``--help``, with one meaning
per code across them all, and ``bench`` shows every option's default."""

from __future__ import annotations

import argparse
import re

import pytest

from agentstores.cli import build_parser, main
from agentstores.cli._exits import CANNOT_RUN, FOUND_PROBLEM, OK

COMMANDS = [[], ["backends"], ["check"], ["drill"], ["bench"], ["schema"], ["schema", "install"]]


def _parser(path: list[str]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _exit_codes(help_text: str) -> dict[int, str]:
    block = help_text.split("exit codes", 1)[1].split(":", 1)[1]
    codes: dict[int, str] = {}
    for line in block.splitlines():
        found = re.match(r"  (\d)  (.*)", line)
        if found:
            codes[int(found[1])] = found[2]
        elif line.startswith("     ") and codes:
            last = max(codes)
            codes[last] += " " + line.strip()
    return codes


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "agentstores")
def test_help_states_the_exit_codes(path: list[str]) -> None:
    codes = _exit_codes(_parser(path).format_help())
    assert OK in codes and CANNOT_RUN in codes, codes
    assert set(codes) <= {OK, FOUND_PROBLEM, CANNOT_RUN}, codes
    assert "usage error" in codes[CANNOT_RUN], "2 means a usage error or could not run, always"
    if FOUND_PROBLEM in codes:
        assert "usage" not in codes[FOUND_PROBLEM] and "could not run" not in codes[FOUND_PROBLEM]


def test_bench_shows_every_default() -> None:
    bench = _parser(["bench"])
    options = [a for a in bench._actions if a.option_strings and a.dest != "help"]
    assert options
    missing = [a.option_strings[0] for a in options if "(default: " not in (a.help or "")]
    assert not missing, f"options without their default in --help: {missing}"
    text = bench.format_help()
    assert "concurrent clients (default: 32)" in text
    assert "(default: %" not in text, "every %(default)s placeholder is filled"


@pytest.mark.parametrize(
    "argv",
    [["drill", "nothing"], ["drill", "tests.catalogue.mutants:cas_creates_from_epoch"]],
    ids=["bare-word", "spec"],
)
def test_drill_refuses_a_positional_that_is_not_a_url(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == CANNOT_RUN
    err = capsys.readouterr().err
    assert "is not a backend URL" in err and "--factory module:callable" in err


def test_an_unreported_usage_error_is_one_line_and_exit_two(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["schema", "install", "mongodb://db/app"])
    assert code == CANNOT_RUN
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install agentstores-mongo" in err
