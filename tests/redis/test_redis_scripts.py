"""The Lua scripts ship as package data: every ``scripts/*.lua`` file is loaded, every
shared fragment is used and resolved, and whether a script may write comes from its
first line."""

from __future__ import annotations

from importlib import resources

from agentstores_redis.lua import ALL_SCRIPTS

SCRIPTS = resources.files("agentstores_redis").joinpath("scripts")


def test_every_script_file_is_loaded_once() -> None:
    files = sorted(p.name[: -len(".lua")] for p in SCRIPTS.iterdir() if p.name.endswith(".lua"))
    names = [s.name for s in ALL_SCRIPTS]
    assert len(names) == len(set(names))
    assert sorted(names) == files


def test_fragments_are_resolved_and_each_is_used() -> None:
    fragments = {
        p.name: p.read_text("utf-8")
        for p in SCRIPTS.joinpath("include").iterdir()
        if p.name.endswith(".lua")
    }
    assert fragments
    for script in ALL_SCRIPTS:
        assert "--! include" not in script.source, script.name
    for name, body in fragments.items():
        first = body.strip().splitlines()[0]
        assert any(first in s.source for s in ALL_SCRIPTS), f"{name} is included nowhere"


def test_the_first_line_says_whether_a_script_writes() -> None:
    for script in ALL_SCRIPTS:
        first = script.source.split("\n", 1)[0]
        assert first == ("#!lua" if script.write else "#!lua flags=no-writes"), script.name
