"""The settlement of a recorded history against a read-back (tests/netfaults/settle.py),
on hand-made histories whose answers are known."""

from __future__ import annotations

from typing import Any

from tests.failover.workload import Call, Result
from tests.netfaults.settle import Readback, settle


def call(op: str, epoch: int, outcome: str, **extra: Any) -> Call:
    done = None if outcome == "unknown" else 2.0
    return Call(0, 0, 0, op, epoch, 1.0, done, outcome, **extra)


def unknown(op: str, epoch: int, **extra: Any) -> Call:
    return call(op, epoch, "unknown", error="UnknownOutcomeError", **extra)


def run(calls: list[Call], ids: tuple[str, ...] = (), epoch: int | None = None) -> dict[str, Any]:
    result = Result("t", 1, calls)
    return settle(result, {0: Readback(ids, None, epoch)}).as_dict()


def test_appends_settle_by_their_ids() -> None:
    s = run([unknown("append", 1, item="a"), unknown("append", 1, item="b")], ids=("a",))
    assert s["settled"] == {"append landed": 1, "append not_landed": 1}
    assert run([unknown("append", 1, item="a")], ids=("a", "a"))["twice"] == 1


def test_a_refused_or_never_sent_write_that_landed_is_a_violation() -> None:
    refused = call("append", 1, "refused", item="a", error="FencedError")
    assert run([refused], ids=("a",))["denied_but_landed"] == 1
    assert run([refused], ids=())["denied_but_landed"] == 0
    never_sent = call("append", 1, "unknown", item="a", error="BackendUnavailableError")
    assert run([never_sent], ids=("a",))["denied_but_landed"] == 1
    lost_claim = call("claim", 3, "refused", expected=2, result=False)
    assert run([lost_claim], epoch=3)["denied_but_landed"] == 1


def test_claims_settle_by_the_epochs_the_row_reached() -> None:
    assert run([unknown("claim", 2, expected=1)], epoch=2)["settled"] == {"claim landed": 1}
    assert run([unknown("claim", 2, expected=1)], epoch=1)["settled"] == {"claim not_landed": 1}
    other = call("claim", 2, "ok", expected=1, result=True)
    s = run([unknown("claim", 2, expected=1), other], epoch=2)
    assert s["settled"] == {"claim not_landed": 1}
    rivals = [unknown("claim", 2, expected=1), unknown("claim", 2, expected=0)]
    assert run(rivals, epoch=2)["settled"] == {"claim rival": 2}


def test_a_chain_of_unknown_claims_is_followed_back() -> None:
    """Epoch 1 was never observed, but the claim from 1 to 2 landed, so 1 was reached."""
    chain = [unknown("claim", 1, expected=None), unknown("claim", 2, expected=1)]
    assert run(chain, epoch=2)["settled"] == {"claim landed": 2}
