"""The sequential models of the multi-record races accept what they should and no more."""

from __future__ import annotations

from typing import Any

from agentstores_contract.linearizability import Operation, check
from agentstores_contract.multi_record import (
    ERASURE_START,
    SEED,
    erasure_step,
    idle_sweep_step,
    sweep_step,
    transcript_step,
)


def history(*ops: tuple[int, Any, Any, float, float]) -> list[Operation]:
    return [Operation(c, call, result, start, end) for c, call, result, start, end in ops]


def test_a_write_racing_the_erasure_may_land_before_it() -> None:
    ops = history(
        (0, ("delete",), True, 0, 10),
        (1, ("save", "v1"), "ok", 1, 9),
        (2, ("state",), None, 11, 12),
    )
    assert check(ops, ERASURE_START, erasure_step)


def test_a_half_erased_key_is_not_linearizable() -> None:
    ops = history(
        (0, ("delete",), True, 0, 10),
        (1, ("messages",), (), 1, 2),
        (2, ("state",), "s0", 3, 4),
    )
    assert not check(ops, ERASURE_START, erasure_step)


def test_a_write_accepted_after_the_erasure_is_not_linearizable() -> None:
    ops = history(
        (0, ("delete",), True, 0, 1),
        (1, ("append", "x", "xb"), "ok", 2, 3),
    )
    assert not check(ops, ERASURE_START, erasure_step)


def test_a_torn_batch_is_not_linearizable() -> None:
    batch = (("x", "user"), ("xb", "assistant"))
    ops = history(
        (0, ("append", batch), "ok", 0, 10),
        (1, ("messages",), ("u0", "a0", "u1", "a1", "x"), 1, 2),
    )
    assert not check(ops, SEED, transcript_step)


def test_a_truncate_must_count_what_it_removed() -> None:
    batch = (("x", "user"), ("xb", "assistant"))
    fine = history(
        (0, ("truncate", "u1"), 4, 0, 10),
        (1, ("append", batch), "ok", 1, 2),
    )
    assert check(fine, SEED, transcript_step)
    lost = history(
        (0, ("truncate", "u1"), 2, 0, 10),
        (1, ("append", batch), "ok", 1, 2),
        (2, ("messages",), ("u0", "a0"), 11, 12),
    )
    assert not check(lost, SEED, transcript_step)


def test_a_branch_is_a_prefix_the_source_once_had() -> None:
    batch = (("x", "user"), ("xb", "assistant"))
    mixed = (("user", "u0"), ("assistant", "a0"), ("user", "x"), ("assistant", "xb"))
    ops = history(
        (0, ("branch", "a1"), mixed, 0, 10),
        (1, ("truncate", "u1"), 2, 1, 2),
        (2, ("append", batch), "ok", 3, 4),
    )
    assert not check(ops, SEED, transcript_step)
    whole = tuple((role, mid) for mid, role in SEED)
    ops[0] = Operation(0, ("branch", "a1"), whole, 0, 10)
    assert check(ops, SEED, transcript_step)


def test_a_touched_conversation_is_not_erased_after_the_touch() -> None:
    ops = history(
        (0, ("touch", "append"), "ok", 0, 1),
        (1, ("erase_if",), True, 2, 3),
    )
    assert not check(ops, (False, True, 1), sweep_step)
    racing = history(
        (0, ("touch", "append"), "no", 0, 5),
        (1, ("erase_if",), True, 1, 3),
    )
    assert check(racing, (False, True, 1), sweep_step)


def timed(*ops: tuple[int, Any, Any, float, float]) -> list[Operation]:
    """A history as ``Recorder(timed=True)`` records it (times in ns)."""
    return [Operation(c, (*call, a, b, res), res, a, b) for c, call, res, a, b in ops]


MS = 1_000_000
IDLE_START = (False, True, 1, None)


def test_an_idle_touch_lapses_only_after_the_idle_threshold() -> None:
    """IdleFor: an erasure ending soon after a touch began must not erase; one ending an
    idle threshold later may (the conversation is idle again) or may not."""
    soon = timed(
        (0, ("touch", "append"), "ok", 0, 10 * MS),
        (1, ("erase_if",), True, 50 * MS, 100 * MS),
        (2, ("info",), None, 600 * MS, 610 * MS),
    )
    assert not check(soon, IDLE_START, idle_sweep_step)
    late = timed(
        (0, ("touch", "append"), "ok", 0, 10 * MS),
        (1, ("erase_if",), True, 500 * MS, 520 * MS),
        (2, ("info",), None, 600 * MS, 610 * MS),
    )
    assert check(late, IDLE_START, idle_sweep_step)
    kept = timed(
        (0, ("touch", "append"), "ok", 0, 10 * MS),
        (1, ("erase_if",), False, 500 * MS, 520 * MS),
        (2, ("info",), 2, 600 * MS, 610 * MS),
    )
    assert check(kept, IDLE_START, idle_sweep_step)
    lost_touch = timed(
        (0, ("touch", "append"), "ok", 0, 10 * MS),
        (1, ("erase_if",), False, 500 * MS, 520 * MS),
        (2, ("info",), 1, 600 * MS, 610 * MS),
    )
    assert not check(lost_touch, IDLE_START, idle_sweep_step)
