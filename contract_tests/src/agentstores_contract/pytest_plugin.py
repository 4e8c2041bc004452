"""pytest plugin: inert unless --agentstores-url or --agentstores-factory is given.

With either option the whole contract suite runs against that backend (in addition
to any test paths given on the command line). Every collected test carries a
``promise`` marker naming the contract sentence it checks.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.util
import os
from typing import Any

import pytest

# The whole package, before this plugin imports any of its modules, so that a failing
# contract assertion explains itself (``assert got == want`` with both sides shown).
# pytest marks it on its own only in some ways of installing and loading the plugin, not
# for ``-p agentstores_contract.pytest_plugin`` or a conftest's ``pytest_plugins``.
pytest.register_assert_rewrite("agentstores_contract")

from agentstores.errors import UsageError  # noqa: E402
from agentstores.urls import redact_url  # noqa: E402

from . import profiles, seeds, waivers  # noqa: E402
from .promises import promises_of  # noqa: E402

RUNNER_MODULE = "agentstores_contract._run"
_BACKEND_KEY = pytest.StashKey[Any]()
_WAIVE_KEY = pytest.StashKey[dict[str, str]]()
_TALLY_KEY = pytest.StashKey[waivers.Tally]()


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
    group.addoption(
        "--agentstores-waive",
        metavar="PROMISE=REASON",
        action="append",
        default=[],
        help="waive a promise of the --agentstores-url/--agentstores-factory backend: its "
        "tests run as expected failures, and pass no more (repeatable)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "promise(name): the contract promise a test checks")
    name = config.getoption("agentstores_profile") or os.environ.get(
        profiles.PROFILE_ENV, profiles.DEFAULT_PROFILE
    )
    profiles.set_active(name)
    seeds.set_seed(config.getoption("agentstores_seed"))
    config.stash[_TALLY_KEY] = waivers.Tally()
    try:
        config.stash[_WAIVE_KEY] = waivers.checked(
            dict(waivers.parse(text) for text in config.getoption("agentstores_waive"))
        )
    except UsageError as exc:
        raise pytest.UsageError(f"--agentstores-waive: {exc}") from None
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


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_TALLY_KEY].expect(session.items)


def pytest_report_header(config: pytest.Config) -> str | None:
    target = config.getoption("agentstores_url") or config.getoption("agentstores_factory")
    if not target:
        return None
    shown = redact_url(target)
    return (
        f"agentstores contract: {shown} (profile {profiles.active().name}, seed {seeds.current()})"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    """Once the fixtures are set up (the backend among them), a test whose promises the
    backend waives becomes an expected failure."""
    result = yield
    waived = waivers.of_item(item)
    if waived:
        item.stash[waivers.WAIVED] = waived
        item.add_marker(pytest.mark.xfail(reason=waivers.xfail_reason(waived), strict=False))
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Contract tests draw their hypothesis examples from the run's seed; other tests in
    the same session keep hypothesis' own seeding."""
    if not promises_of(item):
        return (yield)
    from hypothesis import core

    previous = core.global_force_seed
    core.global_force_seed = seeds.current()  # type: ignore[assignment]  # typed as None
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
    tally = item.config.stash.get(_TALLY_KEY, None)
    problems = tally.record(item, report) if tally is not None else []
    if problems and report.passed:
        report.outcome = "failed"
        report.longrepr = "\n".join(problems)
    elif problems:
        report.sections.append(("agentstores waivers", "\n".join(problems)))
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
            backend = as_backend(url)
        elif factory:
            backend = from_factory(factory)
        else:
            raise pytest.UsageError("no --agentstores-url or --agentstores-factory given")
        extra = config.stash.get(_WAIVE_KEY, {})
        if extra:
            backend = dataclasses.replace(backend, waive={**backend.waive, **extra})
        config.stash[_BACKEND_KEY] = backend
    return config.stash[_BACKEND_KEY]
