"""Unknown URL options: every backend here refuses them by name when the bundle is made,
and the suite's promise fails a backend that drops them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstores.errors import UsageError
from agentstores.memory.stores import MemoryStores
from agentstores.plugins import BackendInfo, create_stores, get_registry
from agentstores.stores import kit
from agentstores_contract import validate
from agentstores_contract.validation import FAILED, PASSED


def lenient(url: str, **options: object) -> MemoryStores:
    """A backend that drops whatever query its URL carries: what the promise catches."""
    return MemoryStores("memory://lenient-" + url.split("://", 1)[1].split("?", 1)[0])


@pytest.fixture
def lenient_scheme() -> Iterator[str]:
    registry = get_registry()
    info = BackendInfo(name="lenient", schemes=("lenient",), factory=f"{__name__}:lenient")
    registry.backends["lenient"] = info
    try:
        yield "lenient"
    finally:
        del registry.backends["lenient"]


@pytest.mark.parametrize(
    ("url", "known"),
    [
        ("memory://x?pool_size=2", "known: none"),
        ("file://./.agentstores?fsync=false", "known: push"),
        ("template://?x=1", "known: none"),
    ],
    ids=["memory", "file", "template"],
)
def test_each_backend_refuses_an_unknown_option_naming_it(url: str, known: str) -> None:
    option = url.rsplit("?", 1)[1].split("=", 1)[0]
    with pytest.raises(UsageError, match=f"URL option '{option}'; {known}") as refused:
        create_stores(url)
    assert refused.value.context["option"] == option


def test_a_file_url_without_options_still_names_its_directory(tmp_path: Path) -> None:
    stores = create_stores(f"file://{tmp_path}/store")
    assert stores.path == str(tmp_path / "store")  # type: ignore[attr-defined]


def test_url_options_returns_known_pairs_in_order_and_names_the_known_ones() -> None:
    pairs = kit.url_options("x://h/p?b=2&a=1&b=3&c=", {"a", "b", "c"}, backend="x")
    assert pairs == [("b", "2"), ("a", "1"), ("b", "3"), ("c", "")]
    with pytest.raises(UsageError, match=r"unknown x URL option 'd'; known: a, b \(see docs\)"):
        kit.url_options("x://h/p?a=1&d=4", {"b", "a"}, backend="x", hint=" (see docs)")


def test_the_suite_fails_a_backend_that_drops_unknown_options(lenient_scheme: str) -> None:
    report = validate(f"{lenient_scheme}://{uuid.uuid4().hex}", promises=["urls.*"])
    verdict = report.by_name()["urls.unknown_option"]
    assert verdict.outcome == FAILED, report.table()
    honest = validate(f"memory://{uuid.uuid4().hex}", promises=["urls.*"])
    assert honest.by_name()["urls.unknown_option"].outcome == PASSED, honest.table()
