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
    "agentstores_contract.hostile_input",
    "agentstores_contract.isolation",
    "agentstores_contract.lease_lifecycle",
    "agentstores_contract.lifetimes",
    "agentstores_contract.machines",
    "agentstores_contract.metadata",
    "agentstores_contract.multi_record",
    "agentstores_contract.multiprocess",
    "agentstores_contract.oauth",
    "agentstores_contract.ownership",
    "agentstores_contract.pause_tokens",
    "agentstores_contract.protocol",
    "agentstores_contract.recording",
    "agentstores_contract.regions",
    "agentstores_contract.scenarios",
    "agentstores_contract.state",
    "agentstores_contract.store_edges",
    "agentstores_contract.supervision",
    "agentstores_contract.sweep_accounting",
)

from . import profiles, seeds  # noqa: E402
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
        "--agentstores-seed",
        metavar="N",
        default=None,
        type=seeds.parse,
        help=f"seed for the suite's generated values (default ${seeds.SEED_ENV} or a fresh "
        "one); a failure prints the seed and the command that replays it",
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
    seeds.set_seed(config.getoption("agentstores_seed"))
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
    return (
        f"agentstores contract: {target} (profile {profiles.active().name}, seed {seeds.current()})"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Contract tests draw their hypothesis examples from the run's seed; other tests in
    the same session keep hypothesis' own seeding."""
    if not promises_of(item):
        return (yield)
    from hypothesis import core

    previous = core.global_force_seed
    core.global_force_seed = seeds.current()
    try:
        return (yield)
    finally:
        core.global_force_seed = previous


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report: pytest.TestReport = yield
    names = promises_of(item)
    if report.failed and names:
        config = item.config
        command = seeds.replay_command(
            nodeid=item.nodeid,
            promises=names,
            profile=profiles.active().name,
            url=config.getoption("agentstores_url"),
            factory=config.getoption("agentstores_factory"),
        )
        report.sections.append(("agentstores replay", f"seed {seeds.current()}: {command}"))
        report.user_properties.append(("agentstores_replay", command))
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    failed = terminalreporter.stats.get("failed", [])
    replays = [dict(r.user_properties).get("agentstores_replay") for r in failed]
    replays = [r for r in replays if r]
    if not replays:
        return
    terminalreporter.section("agentstores contract replay")
    terminalreporter.line(
        f"{len(replays)} contract test(s) failed with seed {seeds.current()} "
        f"(profile {profiles.active().name}); replay each with:"
    )
    for command in dict.fromkeys(replays):
        terminalreporter.line(f"  {command}")


def configured_backend(config: pytest.Config) -> Any:
    """The BackendUnderTest the command line names (built once per session)."""
    from .backend import as_backend, from_factory

    if _BACKEND_KEY not in config.stash:
        url = config.getoption("agentstores_url")
        factory = config.getoption("agentstores_factory")
        if url:
            config.stash[_BACKEND_KEY] = as_backend(url)
        elif factory:
            config.stash[_BACKEND_KEY] = from_factory(factory)
        else:
            raise pytest.UsageError("no --agentstores-url or --agentstores-factory given")
    return config.stash[_BACKEND_KEY]
