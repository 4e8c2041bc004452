"""Every distribution's metadata says what is true: its license file exists, its Python
classifiers are the versions run.py and requires-python admit, adapters bound the core
API they subclass, and the noxfile builds exactly the shipped distributions."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest
import run
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.wheels.distributions import ROOT, SHIPPED, Distribution

TEMPLATE = "templates/agentstores-template"
ALL = [*SHIPPED, TEMPLATE]
URL_KEYS = {"Homepage", "Documentation", "Repository", "Issues"}
FLOORS = {"packages/agentstores-zav": (3, 12)}
"""Distributions whose framework needs a newer Python than run.py's oldest (the zav SDK)."""


def _project(path: str) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / path / "pyproject.toml").read_text())["project"]
    return project


def test_shipped_is_every_distribution_in_the_repository() -> None:
    found = {p.parent.relative_to(ROOT).as_posix() for p in ROOT.glob("packages/*/pyproject.toml")}
    assert set(SHIPPED) == found | {"contract_tests"}


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_distribution_table_names_every_shipped_distribution(page: str) -> None:
    text = (ROOT / page).read_text()
    named = re.findall(r"^\| `(agentstores[\w-]*)` \|", text, re.MULTILINE)
    assert sorted(named) == sorted(Distribution.load(path).name for path in SHIPPED)


def test_the_noxfile_builds_exactly_the_shipped_distributions() -> None:
    import noxfile

    assert tuple(noxfile.DISTRIBUTIONS) == SHIPPED


@pytest.mark.parametrize("path", ALL)
def test_the_license_file_the_metadata_claims_is_there(path: str) -> None:
    project = _project(path)
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / path / "LICENSE").read_text()
    assert text == (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


@pytest.mark.parametrize("path", ALL)
def test_python_classifiers_match_requires_python_and_run_py(path: str) -> None:
    project = _project(path)
    admitted = SpecifierSet(project["requires-python"])
    candidates = [(3, minor) for minor in range(8, 20)]
    expected = tuple(v for v in run.SUPPORTED if v >= FLOORS.get(path, run.SUPPORTED[0]))
    assert tuple(v for v in candidates if f"{v[0]}.{v[1]}" in admitted) == expected
    versions = {
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if c.startswith("Programming Language :: Python :: 3.")
    }
    assert versions == {f"{major}.{minor}" for major, minor in expected}
    assert "Typing :: Typed" in project["classifiers"]
    assert not any(c.startswith("License ::") for c in project["classifiers"]), (
        "a license classifier beside an SPDX license expression is refused by PEP 639"
    )


@pytest.mark.parametrize("path", ALL)
def test_project_urls_are_given(path: str) -> None:
    urls = _project(path)["urls"]
    assert set(urls) == URL_KEYS
    assert all(url.startswith("https://") for url in urls.values())
    assert len({_project(p)["urls"]["Repository"] for p in ALL}) == 1


@pytest.mark.parametrize("path", ALL)
def test_each_package_is_marked_typed(path: str) -> None:
    dist = Distribution.load(path)
    assert (dist.path / "src" / dist.package / "py.typed").is_file()


@pytest.mark.parametrize("path", [p for p in ALL if p != "packages/agentstores"])
def test_dependents_bound_the_core_api_they_build_on(path: str) -> None:
    (core,) = [
        Requirement(d) for d in _project(path)["dependencies"] if d.startswith("agentstores")
    ]
    assert core.name == "agentstores"
    version = _project("packages/agentstores")["version"]
    assert version in core.specifier, "the bound must admit the core in this repository"
    assert "0.2.0" not in core.specifier and "1.0.0" not in core.specifier


def test_hiredis_is_an_extra_of_the_redis_adapter_not_a_requirement() -> None:
    project = _project("packages/agentstores-redis")
    assert not any(Requirement(d).name == "hiredis" for d in project["dependencies"])
    assert [Requirement(d).name for d in project["optional-dependencies"]["hiredis"]] == ["hiredis"]


def test_matplotlib_is_the_plot_extra_of_the_tools_not_a_requirement() -> None:
    project = _project("packages/agentstores-tools")
    assert not any(Requirement(d).name == "matplotlib" for d in project["dependencies"])
    assert [Requirement(d).name for d in project["optional-dependencies"]["plot"]] == ["matplotlib"]


def test_core_requires_pluggy_alone_and_has_no_tooling_extra() -> None:
    project = _project("packages/agentstores")
    assert [Requirement(d).name for d in project["dependencies"]] == ["pluggy"]
    assert set(project.get("optional-dependencies", {})) == {"crypto"}


def _workspace() -> dict[str, Any]:
    workspace: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return workspace


BRIDGED = {
    "packages/agentstores-openai-agents": {"openai-agents"},
    "packages/agentstores-adk": {"google-adk"},
}
"""The peers a framework bridge depends on: the framework it bridges, and nothing else."""


def test_no_peer_is_a_dependency_of_any_distribution() -> None:
    """The peers the bench measures are installed in its session only; a bridge depends on
    its own framework (the bridges themselves are in the peers group, to be measured)."""
    import noxfile

    groups = _workspace()["dependency-groups"]
    peers = {Requirement(d).name for d in groups["peers"]}
    peers -= {_project(path)["name"] for path in noxfile.DISTRIBUTIONS}
    for path in noxfile.DISTRIBUTIONS:
        project = _project(path)
        needed = {Requirement(d).name for d in project.get("dependencies", [])}
        for extra in project.get("optional-dependencies", {}).values():
            needed |= {Requirement(d).name for d in extra}
        assert needed & peers == BRIDGED.get(path, set()), (path, needed & peers)


def test_every_session_installs_from_the_lock() -> None:
    """No session installs by name (what an index serves that day): each syncs groups of
    the workspace, which uv.lock pins, with --locked (a stale lock fails the session)."""
    import ast

    tree = ast.parse((ROOT / "noxfile.py").read_text())
    installs = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in {"install", "conda_install"}
    ]
    assert installs == [], f"noxfile.py installs outside the lock at lines {installs}"
    import inspect

    import noxfile

    assert '"--locked"' in inspect.getsource(noxfile._sync)
    assert (ROOT / "uv.lock").is_file()


def test_every_distribution_is_in_the_workspace_and_locked() -> None:
    """A distribution left out of the workspace would be installed unpinned, or not at all."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked = {package["name"] for package in lock["package"]}
    for path in ALL:
        assert _project(path)["name"] in locked, path
