"""pytest plugin: inert unless --agentstores-url or --agentstores-factory is given.

With either option the whole contract suite runs against that backend (in addition
to any test paths given on the command line). Every collected test carries a
``promise`` marker naming the contract sentence it checks.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
from typing import Any

import pytest

pytest.register_assert_rewrite(
    "agentstores_contract.base",
    "agentstores_contract.clock",
    "agentstores_contract.concurrency",
    "agentstores_contract.conversations",
    "agentstores_contract.erasure",
    "agentstores_contract.fencing",
    "agentstores_contract.isolation",
    "agentstores_contract.lease_lifecycle",
    "agentstores_contract.machines",
    "agentstores_contract.multiprocess",
    "agentstores_contract.oauth",
    "agentstores_contract.ownership",
    "agentstores_contract.pause_tokens",
    "agentstores_contract.protocol",
    "agentstores_contract.recording",
    "agentstores_contract.scenarios",
    "agentstores_contract.state",
    "agentstores_contract.store_edges",
    "agentstores_contract.supervision",
    "agentstores_contract.sweep_accounting",
)

from . import profiles  # noqa: E402
from .promises import promises_of  # noqa: E402

RUNNER_MODULE = "agentstores_contract._run"
_BACKEND_KEY = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentstores", "agentstores contract suite")
    group.addoption(
        "--agentstores-url",
        metavar="URL",
        default=None,
        help="run the contract suite against the backend this URL names",
    )
    group.addoption(
        "--agentstores-factory",
        metavar="MODULE:CALLABLE",
        default=None,
        help="run the contract suite against a backend from a factory callable "
        "(returning a BackendUnderTest or an unopened Stores bundle)",
    )
    group.addoption(
        "--agentstores-profile",
        metavar="NAME",
        default=None,
        choices=sorted(profiles.PROFILES),
        help=f"suite profile (default ${profiles.PROFILE_ENV} or {profiles.DEFAULT_PROFILE!r})",
    )
    group.addoption(
        "--agentstores-promise",
        metavar="GLOB",
        action="append",
        default=[],
        help="run only the contract tests of promises matching this pattern "
        "(repeatable; tests without a promise are kept)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "promise(name): the contract promise a test checks")
    name = config.getoption("agentstores_profile") or os.environ.get(
        profiles.PROFILE_ENV, profiles.DEFAULT_PROFILE
    )
    profiles.set_active(name)
    url = config.getoption("agentstores_url")
    factory = config.getoption("agentstores_factory")
    if url and factory:
        raise pytest.UsageError("pass --agentstores-url or --agentstores-factory, not both")
    if not (url or factory):
        return
    spec = importlib.util.find_spec(RUNNER_MODULE)
    assert spec is not None and spec.origin is not None
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(spec.origin)
    else:
        config.args[:] = [spec.origin]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    patterns = config.getoption("agentstores_promise")
    if not patterns:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        names = promises_of(item)
        chosen = not names or any(fnmatch.fnmatchcase(n, p) for n in names for p in patterns)
        (keep if chosen else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> str | None:
    target = config.getoption("agentstores_url") or config.getoption("agentstores_factory")
    if not target:
        return None
    return f"agentstores contract: {target} (profile {profiles.active().name})"


def configured_backend(config: pytest.Config) -> Any:
    """The BackendUnderTest the command line names (built once per session)."""
    from .backend import BackendUnderTest, as_backend

    if _BACKEND_KEY not in config.stash:
        url = config.getoption("agentstores_url")
        factory = config.getoption("agentstores_factory")
        if url:
            config.stash[_BACKEND_KEY] = BackendUnderTest.from_url(url)
        elif factory:
            config.stash[_BACKEND_KEY] = as_backend(factory)
        else:
            raise pytest.UsageError("no --agentstores-url or --agentstores-factory given")
    return config.stash[_BACKEND_KEY]
