"""The template adapter: it installs, registers, implements exactly the abstract methods,
``agentstores check`` refuses it with every missing method named, not a traceback, and
its own ``tests/test_contract.py`` runs the contract suite against it."""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentstores import stores as abcs
from agentstores.keys import ConversationKey
from agentstores.plugins import create_stores, get_registry
from agentstores_template.stores import TemplateStores

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "templates" / "agentstores-template"
PAIRS = {
    "supervision": abcs.SupervisionStore,
    "recording": abcs.RecordingStore,
    "state": abcs.AgentStateStore,
    "conversations": abcs.ConversationStore,
    "pause_tokens": abcs.PauseTokenStore,
    "oauth": abcs.OAuthStore,
}


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=cwd,
    )


def test_installed_with_one_entry_point() -> None:
    assert importlib.metadata.version("agentstores-template") == "0.1.0"
    points = [
        ep
        for ep in importlib.metadata.entry_points(group="agentstores")
        if ep.value == "agentstores_template.plugin"
    ]
    assert [ep.name for ep in points] == ["template"]


def test_registered_and_listed() -> None:
    info = get_registry(refresh=True).by_scheme("template")
    assert info is not None and info.name == "template"
    assert info.distribution == "agentstores-template"
    stores = create_stores("template://")
    assert isinstance(stores, TemplateStores) and stores.capabilities == info.capabilities
    listed = run("-m", "agentstores.cli", "backends", "--json")
    template = {b["name"]: b for b in json.loads(listed.stdout)["backends"]}["template"]
    assert template["schemes"] == ["template"] and template["version"] == "0.1.0"


def test_implements_exactly_the_abstract_methods() -> None:
    """Nothing more (a skeleton to fill), nothing less (it must instantiate)."""
    stores = TemplateStores()
    assert written(TemplateStores) == set(abcs.Stores.__abstractmethods__)
    for attribute, abc in PAIRS.items():
        store = getattr(stores, attribute)
        assert isinstance(store, abc)
        assert written(type(store)) == set(abc.__abstractmethods__), attribute
    count = len(abcs.Stores.__abstractmethods__)
    count += sum(len(abc.__abstractmethods__) for abc in PAIRS.values())
    assert count == 33, "the adapter surface changed: say so in docs/writing-a-backend.md"


def written(cls: type) -> set[str]:
    """The methods ``cls`` itself defines, dunders aside."""
    return {
        name
        for name, value in vars(cls).items()
        if inspect.isfunction(value) and not name.startswith("__")
    }


async def test_every_method_says_which_rule_it_keeps() -> None:
    stores = TemplateStores()
    with pytest.raises(NotImplementedError, match="Stores rule now"):
        await stores.now()
    with pytest.raises(NotImplementedError, match=r"kit\.check_write"):
        await stores.state.save(ConversationKey("t", "s"), "p", {})


def test_check_refuses_it_naming_what_is_not_implemented() -> None:
    result = run("-m", "agentstores.cli", "check", "template://", "--profile", "quick")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output  # promises fail: the check convention
    assert "Traceback" not in output
    rows = [line for line in result.stdout.splitlines() if line.startswith("[")]
    failed = [line for line in rows if "FAILED" in line]
    assert failed and all("FAILED" in line and "not implemented: " in line for line in failed)
    listed = result.stdout.split("not implemented by the backend (NotImplementedError):\n")[1]
    assert "  TemplateConversationStore._append_messages\n" in listed
    assert "replay a failure" not in result.stdout, "a missing method has nothing to replay"


def test_check_json_names_every_method_the_suite_reached() -> None:
    result = run("-m", "agentstores.cli", "check", "template://", "--profile", "quick", "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["error"] is None and report["replays"] == {}
    assert {
        "TemplateStores.now",
        "TemplateConversationStore._append_messages",
        "TemplateSupervisionStore._compare_and_swap",
        "TemplateAgentStateStore._save",
        "TemplateRecordingStore._put",
        "TemplateOAuthStore._save_user_integration",
    } <= set(report["not_implemented"])
    failed = [p for p in report["promises"] if p["outcome"] == "failed"]
    assert failed and all(p["reason"].startswith("not implemented: ") for p in failed), [
        p["reason"] for p in failed if not p["reason"].startswith("not implemented: ")
    ]


def test_its_own_contract_tests_collect_the_whole_suite() -> None:
    """Run from the template's folder, as in a copy of it: its pytest settings, its tests."""
    from agentstores_contract import ContractSuite

    listed = run("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", cwd=TEMPLATE)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    prefix = "tests/test_contract.py::TestTemplateContract::"
    collected = {
        line.removeprefix(prefix).split("[")[0]
        for line in listed.stdout.splitlines()
        if line.startswith(prefix)
    }
    assert collected == {name for name in dir(ContractSuite) if name.startswith("test_")}
    assert "PytestRemovedIn" not in listed.stdout + listed.stderr, "the fixture form is current"


def test_its_own_contract_tests_run_against_template_urls() -> None:
    chosen = "test_state_model or test_bad_ids_raise_invalid_key"
    result = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", chosen, cwd=TEMPLATE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 failed" in result.stdout, result.stdout
    assert "NotImplementedError: Stores rule now" in result.stdout, result.stdout
