"""The failover counts on hand-written histories: each violation the drills look for is
counted when it happens, and a clean history counts none."""

from __future__ import annotations

from tests.failover.checks import Final, count
from tests.failover.workload import Call, Result


def _ok(op: str, epoch: int, at: float, *, expected: int | None = -1, item: object = None) -> Call:
    """An acknowledged call; a claim expects the epoch below, a heartbeat its own."""
    result = True if op in ("claim", "beat") else None
    if expected == -1:
        expected = epoch - 1 if op == "claim" else epoch
    return Call(0, 0, 0, op, epoch, at, at + 0.5, "ok", result, expected, item)


def _run(*calls: Call) -> Result:
    return Result("t", 1, list(calls))


CLEAN = (
    _ok("claim", 1, 0.0, expected=None),
    _ok("append", 1, 1.0, item="m1"),
    _ok("state", 1, 2.0, item=0),
    _ok("claim", 2, 3.0),
    _ok("append", 2, 4.0, item="m2"),
    _ok("state", 2, 5.0, item=0),
)


def test_a_clean_history_counts_nothing() -> None:
    counts = count(_run(*CLEAN), {0: Final(frozenset({"u0", "m1", "m2"}), (2, 0))})
    assert (counts.lost, counts.double_winners, counts.fenced_accepted) == (0, 0, 0)
    assert counts.linearizable == [True]
    assert counts.acked == 6 and counts.claims_won == 2


def test_a_lost_append_and_an_undone_state_are_counted() -> None:
    counts = count(_run(*CLEAN), {0: Final(frozenset({"u0", "m1"}), (1, 0))})
    assert (counts.appends_lost, counts.states_lost) == (1, 1)


def test_a_state_read_back_older_than_an_acked_save_is_a_lost_write() -> None:
    load = _ok("load", 2, 6.0)
    load.result = [1, 0]  # the save at (2, 0) was acknowledged at 5.5, then undone
    counts = count(_run(*CLEAN, load), {0: Final(frozenset({"u0", "m1", "m2"}), (2, 0))})
    assert counts.states_lost == 1 and counts.appends_lost == 0


def test_two_winners_of_one_epoch_are_counted_and_not_linearizable() -> None:
    again = _ok("claim", 2, 6.0, expected=1)  # the fence went back to 1: epoch 2 won twice
    counts = count(_run(*CLEAN, again), {0: Final(frozenset({"u0", "m1", "m2"}), (2, 0))})
    assert counts.double_winners == 1
    assert counts.linearizable == [False]


def test_a_fenced_write_accepted_after_a_newer_claim_is_counted() -> None:
    stale = _ok("append", 1, 6.0, item="m3")
    counts = count(_run(*CLEAN, stale), {0: Final(frozenset({"u0", "m1", "m2", "m3"}), (2, 0))})
    assert counts.fenced_accepted == 1


def test_an_unknown_call_is_counted_as_unknown_only() -> None:
    lost = Call(0, 0, 0, "append", 2, 6.0, item="m9")  # never completed: outcome unknown
    counts = count(_run(*CLEAN, lost), {0: Final(frozenset({"u0", "m1", "m2"}), (2, 0))})
    assert counts.unknown == 1 and counts.lost == 0
