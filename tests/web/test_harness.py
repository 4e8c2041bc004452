"""The web tests' harness: Node missing is a failure that says what to install, and the
installed tree is keyed on the lockfile."""

from __future__ import annotations

import json

import pytest

from tests.servers import node


def test_node_missing_fails_saying_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(node.NodeMissingError, match="Node 20\\+ and npm"):
        node.programs()


def test_the_installed_tree_is_the_lockfiles() -> None:
    """A warm cache: the tree for this lockfile holds the ``ai`` version the lock pins."""
    lock = json.loads((node.PROJECT / "package-lock.json").read_text())
    pinned = lock["packages"]["node_modules/ai"]["version"]
    tree = node.node_modules()
    assert tree.parent.name == node.lock_key()
    installed = json.loads((tree / "ai" / "package.json").read_text())
    assert installed["version"] == pinned
    package = json.loads((node.PROJECT / "package.json").read_text())
    assert package["dependencies"]["ai"] == pinned  # pinned exactly, not a range
