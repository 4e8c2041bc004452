"""Backend discovery: builtins, third-party entry points, broken plugins, the disable switch.

Each case runs in a fresh interpreter so the registry and ``sys.modules`` start empty and
the throwaway distribution is on ``sys.path`` only there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentstores.errors import UsageError
from agentstores.plugins import BackendInfo, create_stores, get_registry, load_factory, scheme_of
from tests.core._support import run_json, run_python

REGISTRY_DUMP = """
    import json, sys
    from agentstores.plugins import get_registry
    r = get_registry()
    print(json.dumps({
        "backends": {n: list(b.schemes) for n, b in r.backends.items()},
        "failures": {f.entry_point: f.error for f in r.failures},
        "factory_imported": "good_factory" in sys.modules,
    }))
"""


def test_broken_plugins_are_reported_and_the_others_load(plugin_dir: Path) -> None:
    got = run_json(REGISTRY_DUMP, path=plugin_dir)
    assert got["backends"]["good"] == ["good", "good2"]
    assert got["backends"]["memory"] == ["memory"]
    failures = got["failures"]
    assert "this plugin is broken on purpose" in failures["broken"]
    assert "agentstores_backend" in failures["misspelled"]  # check_pending names the typo
    assert "BackendInfo" in failures["wrongtype"]
    assert "unknown capability 'durabel'" in failures["typo"]  # a typo is refused, by name
    assert "typo" not in got["backends"]
    assert "good" not in failures
    assert got["factory_imported"] is False  # discovery never imports a factory module


def test_opening_a_url_imports_only_its_backend(plugin_dir: Path) -> None:
    got = run_json(
        """
        import asyncio, json, sys
        from agentstores.api import open_stores
        from agentstores.keys import ConversationKey
        from agentstores.models import SupervisionRow

        async def main():
            async with open_stores("good2://x") as s:
                ok = await s.supervision.compare_and_swap(
                    ConversationKey("t", "s"), "u", None, SupervisionRow("running", "m", 1))
                return ok, type(s).__name__
        ok, kind = asyncio.run(main())
        print(json.dumps({"ok": ok, "kind": kind, "factory": "good_factory" in sys.modules}))
        """,
        path=plugin_dir,
    )
    assert got == {"ok": True, "kind": "MemoryStores", "factory": True}


@pytest.mark.parametrize(
    ("disabled", "expect_good", "expect_failures"),
    [
        ("broken,misspelled,wrongtype,typo", True, set()),
        ("good", False, {"broken", "misspelled", "wrongtype", "typo"}),
        ("all", False, set()),
        ("1", False, set()),
    ],
)
def test_disable_env(
    plugin_dir: Path, disabled: str, expect_good: bool, expect_failures: set[str]
) -> None:
    got = run_json(REGISTRY_DUMP, path=plugin_dir, env={"AGENTSTORES_DISABLE_PLUGINS": disabled})
    assert ("good" in got["backends"]) == expect_good
    assert "memory" in got["backends"]  # builtins stay
    assert expect_failures <= set(got["failures"])
    for name in {"broken", "misspelled", "wrongtype", "typo"} - expect_failures:
        assert name not in got["failures"]
    if disabled in {"all", "1"}:
        assert got["failures"] == {} and set(got["backends"]) == {"memory"}


def test_unknown_scheme_names_failed_plugins(plugin_dir: Path) -> None:
    out = run_python(
        """
        from agentstores.plugins import create_stores
        create_stores("nosuch://x")
        """,
        path=plugin_dir,
    )
    assert out.returncode != 0
    assert "UsageError" in out.stderr and "handles nosuch://" in out.stderr
    assert "plugins that failed to load" in out.stderr and "broken" in out.stderr


@pytest.mark.parametrize(
    ("scheme", "hint"),
    [
        ("mongodb", "pip install agentstores-mongo"),
        ("mongodb+srv", "pip install agentstores-mongo"),
        ("s3", "pip install agentstores-s3"),
        ("postgresql", "pip install agentstores-postgres"),
        ("valkeys+cluster", "pip install agentstores-redis"),
        ("nosuch", "registers it in the 'agentstores' entry-point group"),
    ],
)
def test_an_unknown_scheme_says_what_to_install(scheme: str, hint: str) -> None:
    registry = get_registry()
    saved = dict(registry.backends)
    registry.backends.clear()  # as if only core were installed
    try:
        with pytest.raises(UsageError) as refused:
            create_stores(f"{scheme}://host/db")
    finally:
        registry.backends.update(saved)
    assert hint in str(refused.value) and refused.value.context["scheme"] == scheme


def test_discovery_imports_no_driver() -> None:
    got = run_json(
        """
        import json, sys
        from agentstores.plugins import get_registry
        get_registry()
        from agentstores.cli.backends import collect
        collect()
        print(json.dumps(sorted(m for m in ("asyncpg", "redis", "cryptography", "pymongo",
                                             "boto3") if m in sys.modules)))
        """
    )
    assert got == []


def test_in_process_registry_basics() -> None:
    registry = get_registry()
    info = registry.by_scheme("memory")
    assert isinstance(info, BackendInfo) and info.name == "memory"
    assert registry.by_scheme("nosuch") is None
    assert load_factory(info).__name__ == "MemoryStores"
    assert get_registry() is registry
    assert get_registry(refresh=True) is not registry


@pytest.mark.parametrize("url", ["", "memory", "no-scheme-here", None])
def test_bad_urls_are_usage_errors(url: object) -> None:
    with pytest.raises(UsageError):
        scheme_of(url)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        create_stores(url)  # type: ignore[arg-type]


def test_scheme_is_case_insensitive() -> None:
    assert scheme_of("MEMORY://x") == "memory"
