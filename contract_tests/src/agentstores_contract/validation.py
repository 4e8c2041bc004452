"""``validate(backend) -> Report``: run the suite in-process and report per promise."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import shlex
import tempfile
import textwrap
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentstores.errors import AgentStoresError, UsageError
from agentstores.urls import redact_url

from . import not_implemented, profiles, seeds, waivers
from .backend import BackendUnderTest, as_backend, from_factory
from .promises import PROMISES, promises_of

PASSED, FAILED, SKIPPED, WAIVED = "passed", "failed", "skipped", "waived"


@dataclass
class TestResult:
    nodeid: str
    promises: list[str]
    outcome: str = PASSED
    reason: str = ""
    duration: float = 0.0
    not_implemented: list[str] = field(default_factory=list)
    """Backend methods the failure ran into ``NotImplementedError`` from."""
    waiver: str = ""
    """Why the backend waives this test's promises, when it does."""


@dataclass
class PromiseResult:
    """One promise's verdict: failed if any of its tests failed (a waiver none of them
    needed included), else waived if the backend waives it and a test failed as expected,
    skipped if all skipped, else passed."""

    name: str
    outcome: str
    reason: str
    tests: list[str] = field(default_factory=list)
    duration: float = 0.0

    @property
    def description(self) -> str:
        return PROMISES.get(self.name, "")


@dataclass
class Report:
    backend: str
    profile: str
    promises: list[PromiseResult]
    tests: list[TestResult]
    duration: float
    error: str | None = None
    """Set when the run itself broke (collection error, usage error, no tests)."""
    seed: int | None = None
    """The seed the run's generated values came from."""
    replays: dict[str, str] = field(default_factory=dict)
    """For each failed promise, the command that replays it with the same seed."""
    waivers: dict[str, str] = field(default_factory=dict)
    """The promises the backend waives, with the reasons it gave."""

    @property
    def ok(self) -> bool:
        """Every promise kept or skipped for a capability: none failed, none waived."""
        return self.error is None and not self.failed and not self.waived

    @property
    def ok_with_waivers(self) -> bool:
        """None failed, waived ones allowed (``agentstores check --accept-waivers``)."""
        return self.error is None and not self.failed

    @property
    def failed(self) -> list[PromiseResult]:
        return [p for p in self.promises if p.outcome == FAILED]

    @property
    def passed(self) -> list[PromiseResult]:
        return [p for p in self.promises if p.outcome == PASSED]

    @property
    def skipped(self) -> list[PromiseResult]:
        return [p for p in self.promises if p.outcome == SKIPPED]

    @property
    def waived(self) -> list[PromiseResult]:
        return [p for p in self.promises if p.outcome == WAIVED]

    @property
    def not_implemented(self) -> list[str]:
        """Backend methods a failed test ran into ``NotImplementedError`` from, sorted."""
        return sorted({m for t in self.tests if t.outcome == FAILED for m in t.not_implemented})

    def by_name(self) -> dict[str, PromiseResult]:
        return {p.name: p for p in self.promises}

    def summary(self) -> str:
        seed = f", seed {self.seed}" if self.seed is not None else ""
        waived = f"{len(self.waived)} waived, " if self.waived else ""
        return (
            f"{len(self.passed)} passed, {len(self.failed)} failed, {waived}"
            f"{len(self.skipped)} skipped "
            f"of {len(self.promises)} promises ({len(self.tests)} tests) in {self.duration:.1f}s"
            f"{seed}"
        )

    def table(self, *, width: int = 100) -> str:
        """A plain-text table, one row per promise, then every failure's reason in full.

        A row's detail is shortened to fit ``width`` (marked ``…``); a failed promise's
        reason is never lost that way: a shortened one follows the table in full, wrapped
        to ``width``.
        """
        name_w = max([len(p.name) for p in self.promises] + [7])
        lines = [f"{'promise':<{name_w}}  result   tests  detail", "-" * min(width, name_w + 40)]
        room = max(20, width - name_w - 18)
        for p in self.promises:
            detail = p.reason if p.outcome != PASSED else p.description
            lines.append(
                f"{p.name:<{name_w}}  {p.outcome.upper():<7}  {len(p.tests):>5}  "
                f"{_fit(_one_line(detail), room)}"
            )
        cut = [p for p in self.failed if len(_one_line(p.reason)) > room]
        if cut:
            lines.append("failures shortened above, in full:")
            for p in cut:
                lines.append(f"  {p.name}:")
                lines += textwrap.wrap(
                    _one_line(p.reason) or "(no reason given)",
                    max(40, width - 4),
                    initial_indent="    ",
                    subsequent_indent="    ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
        if self.not_implemented:
            lines.append("not implemented by the backend (NotImplementedError):")
            lines += [f"  {method}" for method in self.not_implemented]
        if self.error:
            lines.append(f"run error: {self.error}")
        if self.replays:
            lines.append(f"replay a failure (profile {self.profile}, seed {self.seed}):")
            lines += [f"  {command}" for command in self.replays.values()]
        lines.append(self.summary())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "profile": self.profile,
            "ok": self.ok,
            "ok_with_waivers": self.ok_with_waivers,
            "duration": round(self.duration, 3),
            "error": self.error,
            "not_implemented": self.not_implemented,
            "seed": self.seed,
            "replays": self.replays,
            "waivers": self.waivers,
            "promises": [
                {**asdict(p), "description": p.description, "duration": round(p.duration, 3)}
                for p in self.promises
            ],
            "tests": [asdict(t) for t in self.tests],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        promises = [
            PromiseResult(p["name"], p["outcome"], p["reason"], list(p["tests"]), p["duration"])
            for p in data["promises"]
        ]
        tests = [TestResult(**t) for t in data["tests"]]
        return cls(
            data["backend"],
            data["profile"],
            promises,
            tests,
            data["duration"],
            data.get("error"),
            data.get("seed"),
            dict(data.get("replays", {})),
            dict(data.get("waivers", {})),
        )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fit(text: str, room: int) -> str:
    """``text`` cut to ``room`` characters, ending with ``…`` when it was cut."""
    return text if len(text) <= room else text[: room - 1] + "…"


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple):
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    return str(longrepr)[-500:] if longrepr else ""


class Collector:
    """A pytest plugin object: per-test outcomes, folded into promises as they finish."""

    def __init__(
        self, on_result: Callable[[PromiseResult], None] | None = None, *, url: str | None = None
    ) -> None:
        self.on_result = on_result
        self.url = url
        """The backend's URL, shown without its secrets wherever a failure quotes it."""
        self.tests: dict[str, TestResult] = {}
        self.pending: dict[str, int] = {}
        self.results: dict[str, PromiseResult] = {}
        self.errors: list[str] = []
        self.no_replay: set[str] = set()
        """Failed promises a replay would not help: a missing method, a needless waiver."""

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            names = promises_of(item) or ["(untagged)"]
            self.tests[item.nodeid] = TestResult(item.nodeid, names)
            for name in names:
                self.pending[name] = self.pending.get(name, 0) + 1

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append(
                f"collecting {report.nodeid or 'tests'}: {_one_line(str(report.longrepr))[-800:]}"
            )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        noted = not_implemented.take()
        test = self.tests.get(item.nodeid)
        waived = item.stash.get(waivers.WAIVED, None)
        if waived and test is not None:
            test.waiver = "; ".join(dict.fromkeys(waived.values()))
        if report.failed and test is not None:
            raised = call.excinfo.value if call.excinfo is not None else None
            for method in not_implemented.methods_in(raised) + noted:
                if method not in test.not_implemented:
                    test.not_implemented.append(method)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.get(report.nodeid)
        if test is None:
            return
        test.duration += report.duration
        if report.failed and test.outcome != FAILED:
            test.outcome, test.reason = FAILED, _hidden(_reason(report), self.url)
            if test.not_implemented:
                test.reason = f"not implemented: {', '.join(test.not_implemented)}"
            elif report.when != "call" and not test.waiver:
                test.reason = f"in {report.when}: {test.reason}"
        elif report.skipped and hasattr(report, "wasxfail") and test.outcome == PASSED:
            test.outcome, test.reason = WAIVED, test.waiver
        elif report.skipped and test.outcome == PASSED:
            test.outcome, test.reason = SKIPPED, _hidden(_reason(report), self.url)
        if report.when == "teardown":
            for name in test.promises:
                self.pending[name] -= 1
                if self.pending[name] == 0:
                    self._finish(name)

    def _finish(self, name: str) -> None:
        tests = [t for t in self.tests.values() if name in t.promises]
        failed = [t for t in tests if t.outcome == FAILED]
        skipped = [t for t in tests if t.outcome == SKIPPED]
        waived = [t for t in tests if t.outcome == WAIVED]
        missing = sorted({m for t in failed for m in t.not_implemented})
        if failed and all(t.not_implemented for t in failed):
            outcome, reason = FAILED, f"not implemented: {', '.join(missing)}"
            self.no_replay.add(name)
        elif failed and all(t.waiver for t in failed):
            outcome, reason = FAILED, _one_line(failed[0].reason)
            self.no_replay.add(name)
        elif failed:
            outcome = FAILED
            reason = "; ".join(f"{t.nodeid.split('::')[-1]}: {_one_line(t.reason)}" for t in failed)
        elif waived:
            outcome, reason = WAIVED, waived[0].reason
        elif len(skipped) == len(tests):
            outcome, reason = SKIPPED, _one_line(skipped[0].reason)
        else:
            outcome = PASSED
            reason = f"{len(skipped)} of {len(tests)} tests skipped" if skipped else ""
        result = PromiseResult(
            name, outcome, reason, [t.nodeid for t in tests], sum(t.duration for t in tests)
        )
        self.results[name] = result
        if self.on_result is not None:
            self.on_result(result)


_in_process: list[BackendUnderTest] = []


def in_process_backend() -> BackendUnderTest:
    """The backend :func:`validate` was given as an object (see ``--agentstores-factory``)."""
    return _in_process[-1]


REACH_SECONDS = 60.0
"""How long the check before the suite waits for a bundle to open and read its clock."""


def unreachable(backend: BackendUnderTest) -> str | None:
    """Why one bundle cannot open and read the store clock, or None when it can.

    Run before the suite, so an unreachable server or an unusable location is reported
    once, as "could not run", instead of failing every promise after its timeouts.
    """

    async def reach() -> None:
        async with asyncio.timeout(REACH_SECONDS):
            async with backend.open() as stores:
                await stores.now()

    try:
        asyncio.run(reach())
    except NotImplementedError:
        return None  # it opened; the suite reports each missing method by name
    except TimeoutError:
        return f"no answer within {REACH_SECONDS:.0f} s"
    except Exception as exc:
        return _why(exc)
    return None


def _why(exc: BaseException) -> str:
    """An error as one line: our own errors by their message (they say what to do),
    anything else with its type as well."""
    if isinstance(exc, AgentStoresError):
        return _one_line(str(exc))
    return _one_line(f"{type(exc).__name__}: {exc}")


def validate(
    target: object = None,
    *,
    factory: str | None = None,
    profile: str | None = None,
    promises: Iterable[str] | None = None,
    on_result: Callable[[PromiseResult], None] | None = None,
    on_start: Callable[[], None] | None = None,
    pytest_args: Iterable[str] = (),
    seed: int | None = None,
    waive: Mapping[str, str] | None = None,
) -> Report:
    """Run the contract suite against ``target`` in this process and report per promise.

    ``target`` is a backend URL (``scheme://...``), a callable returning a
    BackendUnderTest or an unopened Stores bundle, or a BackendUnderTest; or, instead,
    ``factory`` names such a callable as ``"module:callable"``. A string without ``://``
    is not a URL and is refused (it is never taken for a factory). ``promises`` narrows
    the run to names matching these globs; ``on_start`` is called once the backend has
    answered, just before the suite runs; ``on_result`` is called as each promise's tests
    finish. ``seed`` fixes the generated values (default: a fresh seed, reported in
    ``Report.seed``, with a replay command per failed promise). ``waive`` adds waivers
    (promise name to reason) to the backend's own ``waive``. pytest's own output is
    silenced; a password in a URL is shown as ``***`` in the report.

    Raises:
        UsageError: both ``target`` and ``factory`` given, or neither; a bad ``waive``.
    """
    if (target is None) == (factory is None):
        raise UsageError("validate() takes a target or factory='module:callable', not both")
    extra = waivers.checked(waive or {})
    chosen = profile or profiles.active().name
    run_seed = seeds.fresh() if seed is None else seed
    started = time.perf_counter()
    label = redact_url(target) if isinstance(target, str) else repr(target)
    if factory is not None:
        label = factory
    try:
        backend = from_factory(factory) if factory is not None else as_backend(target)
    except Exception as exc:
        why = f"cannot make a backend from {label}: {_hidden(_why(exc), target)}"
        return Report(label, chosen, [], [], time.perf_counter() - started, why, run_seed)
    if extra:
        backend = dataclasses.replace(backend, waive={**backend.waive, **extra})
    if factory is None and not isinstance(target, str):
        label = backend.label
    problem = unreachable(backend)
    if problem is not None:
        elapsed = time.perf_counter() - started
        why = f"cannot reach {label}: {_hidden(_hidden(problem, target), backend.url)}"
        return Report(label, chosen, [], [], elapsed, why, run_seed)
    if on_start is not None:
        on_start()
    _in_process.append(backend)
    args = ["--agentstores-factory", f"{__name__}:in_process_backend"]
    for pattern in promises or ():
        args += ["--agentstores-promise", pattern]
    spec = importlib.util.find_spec("agentstores_contract._run")
    assert spec is not None and spec.origin is not None
    package_dir = str(Path(spec.origin).parent)
    collector = Collector(on_result, url=backend.url)
    try:
        with tempfile.TemporaryDirectory(prefix="agentstores-contract-") as tmp:
            ini = Path(tmp) / "pytest.ini"
            ini.write_text(
                "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
            )
            code = pytest.main(
                [
                    spec.origin,
                    "-c",
                    str(ini),
                    "--rootdir",
                    tmp,
                    "--confcutdir",
                    package_dir,
                    "-p",
                    "agentstores_contract",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:terminal",
                    "--agentstores-profile",
                    chosen,
                    "--agentstores-seed",
                    str(run_seed),
                    *args,
                    *pytest_args,
                ],
                plugins=[collector],
            )
    finally:
        _in_process.pop()
    error: str | None = None
    if collector.errors:
        error = " | ".join(collector.errors)
    elif int(code) not in (0, 1):
        error = f"pytest exited with {code!r}"
    if not collector.tests and error is None:
        error = "no contract tests were collected"
    ordered = [collector.results[n] for n in collector.pending if n in collector.results]
    replays = {
        p.name: _replay(target if factory is None else None, factory, p.name, chosen, run_seed)
        for p in ordered
        if p.outcome == FAILED and p.name not in collector.no_replay
    }
    return Report(
        label,
        chosen,
        ordered,
        list(collector.tests.values()),
        time.perf_counter() - started,
        error,
        run_seed,
        replays,
        dict(backend.waive),
    )


def _hidden(text: str, url: object) -> str:
    """``text`` with ``url``, wherever it appears in full, shown without its secrets."""
    return text.replace(url, redact_url(url)) if isinstance(url, str) and url else text


def _replay(target: object, factory: str | None, promise: str, profile: str, seed: int) -> str:
    """The command (or call) that reruns one promise of a :func:`validate` run."""
    if isinstance(target, str):
        shown = redact_url(target)
        check = ["agentstores", "check", shown, "--profile", profile, "--seed", str(seed)]
        return shlex.join([*check, "--promise", promise])
    if factory is not None:
        run = ["pytest", "--agentstores-factory", factory, "--agentstores-promise", promise]
        return shlex.join([*run, "--agentstores-profile", profile, "--agentstores-seed", str(seed)])
    return f"validate(<the same backend>, profile={profile!r}, seed={seed}, promises=[{promise!r}])"
