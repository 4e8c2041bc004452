"""The Wing-Gong checker against hand-made histories with known answers."""

from __future__ import annotations

from typing import Any

import pytest

from agentstores_contract.linearizability import (
    CheckBudgetExceeded,
    Operation,
    check,
    format_history,
)


def register(state: Any, call: Any) -> tuple[Any, Any]:
    """A read/write register."""
    if call[0] == "write":
        return "ok", call[1]
    return state, state


def cas_register(state: Any, call: Any) -> tuple[Any, Any]:
    """A compare-and-swap register: ("cas", expected, new) -> bool; ("read",) -> value."""
    if call[0] == "read":
        return state, state
    _, expected, new = call
    return (True, new) if state == expected else (False, state)


def op(client: int, call: Any, result: Any, start: float, end: float | None) -> Operation:
    return Operation(client, call, result, start, end)


def test_empty_history_is_linearizable() -> None:
    assert check([], None, register)


def test_sequential_history() -> None:
    history = [
        op(0, ("write", 1), "ok", 0, 1),
        op(0, ("read",), 1, 2, 3),
        op(1, ("write", 2), "ok", 4, 5),
        op(1, ("read",), 2, 6, 7),
    ]
    verdict = check(history, None, register)
    assert verdict.linearizable
    assert [o.call for o in verdict.order or ()] == [o.call for o in history]


def test_overlapping_write_may_be_seen_or_not() -> None:
    for seen in (0, 1):
        history = [
            op(0, ("write", 1), "ok", 0, 10),
            op(1, ("read",), seen, 2, 3),
        ]
        assert check(history, 0, register), f"a read overlapping a write may return {seen}"


def test_stale_read_after_a_completed_write_is_not_linearizable() -> None:
    history = [
        op(0, ("write", 1), "ok", 0, 1),
        op(1, ("read",), 0, 2, 3),
    ]
    assert not check(history, 0, register)


def test_reads_must_not_go_back_in_time() -> None:
    history = [
        op(0, ("write", 1), "ok", 0, 10),
        op(1, ("read",), 1, 1, 2),
        op(2, ("read",), 0, 3, 4),
    ]
    assert not check(history, 0, register), "once a read saw 1, a later read cannot see 0"


def test_two_cas_winners_on_one_expectation_are_not_linearizable() -> None:
    history = [
        op(0, ("cas", None, "a"), True, 0, 5),
        op(1, ("cas", None, "b"), True, 1, 6),
    ]
    assert not check(history, None, cas_register)


def test_one_cas_winner_is_linearizable_in_either_order() -> None:
    for winner in (0, 1):
        history = [
            op(0, ("cas", None, "a"), winner == 0, 0, 5),
            op(1, ("cas", None, "b"), winner == 1, 1, 6),
            op(2, ("read",), "ab"[winner], 7, 8),
        ]
        assert check(history, None, cas_register)


def test_a_read_must_match_the_winner() -> None:
    history = [
        op(0, ("cas", None, "a"), True, 0, 5),
        op(1, ("cas", None, "b"), False, 1, 6),
        op(2, ("read",), "b", 7, 8),
    ]
    assert not check(history, None, cas_register)


def test_an_unknown_outcome_may_or_may_not_have_happened() -> None:
    happened = [
        op(0, ("write", 1), None, 0, None),
        op(1, ("read",), 1, 5, 6),
    ]
    assert check(happened, 0, register)
    not_happened = [
        op(0, ("write", 1), None, 0, None),
        op(1, ("read",), 0, 5, 6),
    ]
    assert check(not_happened, 0, register)
    before_invoke = [
        op(1, ("read",), 1, 0, 1),
        op(0, ("write", 1), None, 2, None),
    ]
    assert not check(before_invoke, 0, register), "it cannot take effect before it was invoked"


def test_many_concurrent_clients_stay_tractable() -> None:
    history = []
    for c in range(8):
        for i in range(8):
            t = i * 10
            history.append(op(c, ("cas", i, i + 1), c == 0, t + c * 0.1, t + 5 + c * 0.1))
    verdict = check(history, 0, cas_register)
    assert verdict.linearizable
    assert verdict.explored < 10_000


def test_budget_is_reported_not_guessed() -> None:
    history = [op(c, ("write", c), "ok", 0, 100) for c in range(6)]
    history.append(op(9, ("read",), "never", 200, 201))
    with pytest.raises(CheckBudgetExceeded):
        check(history, 0, register, budget=5)


def test_history_formats_one_line_per_operation() -> None:
    text = format_history([op(0, ("write", 1), "ok", 1000, 3000), op(1, ("read",), 1, 0, None)])
    assert text.count("\n") == 1
    assert "('write', 1) -> 'ok'" in text and "?" in text
