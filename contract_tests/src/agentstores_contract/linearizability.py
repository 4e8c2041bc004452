"""A small Wing-Gong linearizability checker with memoization (after Lowe, 2017).

A history is a list of completed (or outcome-unknown) operations on one object, each
with its invoke and response times. It is linearizable when some total order of the
operations respects real time (an operation that responded before another was invoked
comes first) and, replayed through the sequential ``step`` function from the initial
state, gives every completed operation the result it observed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

S = TypeVar("S", bound=Hashable)

Step = Callable[[S, Any], tuple[Any, S]]
"""``step(state, call) -> (result, new_state)``: the sequential specification."""


@dataclass(frozen=True)
class Operation:
    """One call as a client saw it. ``completed=None``: the outcome is unknown, so the
    call may have taken effect at any time after ``invoked``, or never."""

    client: int
    call: Hashable
    result: Hashable
    invoked: float
    completed: float | None


@dataclass(frozen=True)
class Verdict(Generic[S]):
    linearizable: bool
    order: tuple[Operation, ...] | None
    """A witness order when linearizable."""
    explored: int

    def __bool__(self) -> bool:
        return self.linearizable


class CheckBudgetExceeded(RuntimeError):
    """The search visited more configurations than allowed; the answer is unknown."""


def check(
    history: Sequence[Operation], initial: S, step: Step[S], *, budget: int = 200_000
) -> Verdict[S]:
    """Decide whether ``history`` is linearizable with respect to ``step``."""
    ops = sorted(history, key=lambda o: o.invoked)
    required = 0
    for i, op in enumerate(ops):
        if op.completed is not None:
            required |= 1 << i
    seen: set[tuple[int, S]] = set()
    explored = 0

    def search(done: int, state: S) -> list[int] | None:
        nonlocal explored
        if done & required == required:
            return []
        if (done, state) in seen:
            return None
        seen.add((done, state))
        explored += 1
        if explored > budget:
            raise CheckBudgetExceeded(f"more than {budget} configurations explored")
        horizon = min(
            op.completed
            for i, op in enumerate(ops)
            if not done >> i & 1 and op.completed is not None
        )
        for i, op in enumerate(ops):
            if done >> i & 1:
                continue
            if op.invoked > horizon:
                break
            result, new_state = step(state, op.call)
            if op.completed is not None and result != op.result:
                continue
            rest = search(done | 1 << i, new_state)
            if rest is not None:
                return [i, *rest]
        return None

    found = search(0, initial)
    order = None if found is None else tuple(ops[i] for i in found)
    return Verdict(found is not None, order, explored)


def format_history(history: Sequence[Operation]) -> str:
    """One line per operation, by invoke time, times relative to the first invoke."""
    if not history:
        return "(empty history)"
    ops = sorted(history, key=lambda o: o.invoked)
    t0 = ops[0].invoked
    lines = []
    for op in ops:
        end = "?" if op.completed is None else f"{(op.completed - t0) / 1000:9.1f}"
        lines.append(
            f"  c{op.client:<3} [{(op.invoked - t0) / 1000:9.1f}us,{end}us] "
            f"{op.call!r} -> {op.result!r}"
        )
    return "\n".join(lines)
