"""Waivers: a backend says, with a reason, that it does not keep a promise.

A waived promise's tests still run. A failing one is an expected failure (pytest's
``xfail``), never a pass; when every test of a waived promise passes, the waiver is no
longer needed and the run fails, saying so, so a waiver cannot outlive its reason.
``validate()`` and ``agentstores check`` report a waived promise as ``waived``.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentstores.errors import UsageError

from .promises import PROMISES, promises_of

WAIVED = pytest.StashKey[dict[str, str]]()
"""On a test item once its fixtures are set up: its waived promises and their reasons."""


def checked(waive: object) -> dict[str, str]:
    """``waive`` checked: a mapping of promise names to non-blank reasons.

    Raises:
        UsageError: not a mapping, a name that is no promise (the nearest are suggested),
            or a reason that is not a non-blank string.
    """
    if not isinstance(waive, Mapping):
        raise UsageError(f"waive takes a mapping of promise name to reason, got {waive!r}")
    waivers: dict[str, str] = {}
    for name, reason in waive.items():
        if name not in PROMISES:
            near = difflib.get_close_matches(str(name), list(PROMISES), n=3)
            hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
            raise UsageError(f"cannot waive {name!r}: no promise has that name{hint}")
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError(f"waiving {name!r} needs a reason, got {reason!r}")
        waivers[name] = reason.strip()
    return waivers


def parse(text: str) -> tuple[str, str]:
    """``"PROMISE=REASON"`` (a command-line waiver) as a name and a reason.

    Raises:
        UsageError: no ``=``, or nothing on one side of it.
    """
    name, sep, reason = text.partition("=")
    if not sep or not name.strip() or not reason.strip():
        raise UsageError(f"a waiver is PROMISE=REASON, got {text!r}")
    return name.strip(), reason.strip()


def of_item(item: pytest.Item) -> dict[str, str]:
    """The waivers that cover ``item``: each of its promises with its reason when the
    backend it runs against waives all of them, else nothing (a waiver never hides the
    failure of a promise nobody waived)."""
    from .backend import BackendUnderTest

    names = promises_of(item)
    backend: Any = (getattr(item, "funcargs", None) or {}).get("backend")
    if not names or not isinstance(backend, BackendUnderTest):
        return {}
    if not all(name in backend.waive for name in names):
        return {}
    return {name: backend.waive[name] for name in names}


def xfail_reason(waived: Mapping[str, str]) -> str:
    """What pytest shows for a waived test."""
    return "waived: " + "; ".join(dict.fromkeys(waived.values()))


def not_needed(name: str, reason: str, passed: int) -> str:
    """The failure of a waiver none of whose tests failed."""
    return (
        f"the waiver of {name!r} ({reason}) is not needed: none of its tests failed "
        f"({passed} passed); remove it from the backend's waive"
    )


Slot = tuple[str, str]
"""A promise within one test class (or module): the unit a waiver is judged on."""


def _slot_scope(item: pytest.Item) -> str:
    owner = item.getparent(pytest.Class) or item.parent
    return owner.nodeid if owner is not None else item.nodeid


@dataclass
class Tally:
    """How the tests of each waived promise went, per test class (the backend is the
    class's): whether the waiver was needed is known once the promise's last test ends."""

    remaining: Counter[Slot] = field(default_factory=Counter)
    failed: set[Slot] = field(default_factory=set)
    passed: Counter[Slot] = field(default_factory=Counter)
    reasons: dict[Slot, str] = field(default_factory=dict)

    def expect(self, items: list[pytest.Item]) -> None:
        """Count the tests of every promise (the collected, selected ones)."""
        self.remaining = Counter(
            (_slot_scope(item), name) for item in items for name in promises_of(item)
        )

    def record(self, item: pytest.Item, report: pytest.TestReport) -> list[str]:
        """Note one of ``item``'s reports; at the teardown of a promise's last test, the
        failure of each waiver whose tests all passed."""
        scope = _slot_scope(item)
        waived = item.stash.get(WAIVED, {})
        if report.when == "call" and waived and hasattr(report, "wasxfail"):
            for name, reason in waived.items():
                self.reasons[scope, name] = reason
                if report.skipped:  # an expected failure: the waiver is needed
                    self.failed.add((scope, name))
                else:
                    self.passed[scope, name] += 1
        if report.when != "teardown":
            return []
        problems = []
        for name in promises_of(item):
            slot = (scope, name)
            self.remaining[slot] -= 1
            if self.remaining[slot] == 0 and slot in self.passed and slot not in self.failed:
                problems.append(not_needed(name, self.reasons[slot], self.passed[slot]))
        return problems
