"""How each call of a recorded history (tests/failover/workload.py) ended, judged by what
a fresh bundle reads back once the network is healed.

The workload records ``ok``, ``refused`` or ``unknown``; the error name says which kind
of unknown: ``UnknownOutcomeError`` (the adapter says it may have landed),
``BackendUnavailableError`` (the adapter says nothing reached the server, so nothing
changed), anything else (``TimeoutError``: the workload gave up on a call that never
returned; another name: an untyped error escaped the adapter).

Settling, per operation:

- ``append``: message ids are unique per call, so the transcript says it: ``landed``
  (once), ``not_landed``, or ``twice`` (the id more than once: applied twice).
- ``claim``: epochs only grow, so the row moved to epoch E at most once; E was reached
  (the final row, a successful read, the expectation of an acknowledged swap, an
  acknowledged claim) or never. An unknown claim at E ``landed`` when E was reached and
  no other claim at E was acknowledged; ``not_landed`` when E was never reached, or
  another claim took E; ``rival`` when two or more unacknowledged claims raced for a
  reached E (exactly one of them landed; which one, no read can say: the history keeps
  no claimer id in the row).
- ``beat`` (a swap from E to E) and ``read``: ``no_effect`` (the row is the same either
  way). ``state`` (a save, replaced by every later save): ``landed`` when it is the final
  state, else ``overwritten`` (a read cannot tell).

A violation is a call whose report the read-back contradicts: ``refused`` or
``BackendUnavailableError`` yet landed (reported as failure, applied), anything applied
twice, and acknowledged writes lost (counted by tests/failover/checks.py).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from agentstores.api import open_stores
from tests.failover.workload import PRINCIPAL, Call, Result

UNKNOWN = "UnknownOutcomeError"
NOTHING_SENT = "BackendUnavailableError"


@dataclass(frozen=True)
class Readback:
    """One conversation after the run: transcript ids in order (duplicates kept), the
    state's ``(epoch, seq)`` and the row's epoch."""

    ids: tuple[str, ...]
    state: tuple[int, int] | None
    epoch: int | None


async def read_back(url: str, result: Result) -> dict[int, Readback]:
    """Every conversation of ``result`` through a fresh bundle of ``url``."""
    out: dict[int, Readback] = {}
    async with open_stores(url) as stores:
        for n in range(result.conversations):
            key = result.key(n)
            history = await stores.conversations.history(key, PRINCIPAL)
            state = await stores.state.load(key, PRINCIPAL)
            view = await stores.supervision.read(key, PRINCIPAL)
            out[n] = Readback(
                tuple(m.id for m in history),
                (int(state["epoch"]), int(state["seq"])) if "epoch" in state else None,
                None if view.row is None else view.row.epoch,
            )
    return out


@dataclass
class Settlement:
    """A run's calls by outcome, its unknowns by how they settled, and violations."""

    outcomes: Counter[str] = field(default_factory=Counter)
    """``ok``, ``refused``, and each unknown by error name."""
    settled: Counter[str] = field(default_factory=Counter)
    """``<op> <how>`` for every call whose outcome was not ``ok`` or ``refused``."""
    twice: int = 0
    """Writes applied more than once (an append's id in the transcript twice or more)."""
    denied_but_landed: int = 0
    """Calls reported as refused, or as never sent, whose effect is in the store."""
    hung: int = 0
    """Calls the workload abandoned after its own timeout (the adapter never ended them)."""
    untyped: int = 0
    """Calls ended by an error that is no agentstores error."""
    examples: list[str] = field(default_factory=list)

    @property
    def unknown(self) -> int:
        return sum(n for name, n in self.outcomes.items() if name not in ("ok", "refused"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcomes": dict(self.outcomes),
            "unknown": self.unknown,
            "settled": dict(sorted(self.settled.items())),
            "twice": self.twice,
            "denied_but_landed": self.denied_but_landed,
            "hung": self.hung,
            "untyped": self.untyped,
            "examples": self.examples,
        }

    def _example(self, text: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(text)


def settle(result: Result, finals: dict[int, Readback]) -> Settlement:
    """Judge every call of ``result`` against ``finals`` (see the module docstring)."""
    s = Settlement()
    by_conversation: dict[int, list[Call]] = defaultdict(list)
    for call in result.calls:
        by_conversation[call.conversation].append(call)
        kind = call.outcome if call.outcome != "unknown" else call.error or "unknown"
        s.outcomes[kind] += 1
        if call.outcome == "unknown":
            if call.error == "TimeoutError":
                s.hung += 1
            elif call.error not in (UNKNOWN, NOTHING_SENT):
                s.untyped += 1
    for n, calls in by_conversation.items():
        _settle_conversation(n, calls, finals[n], s)
    return s


def _reached(calls: list[Call], final: Readback) -> set[int]:
    """Every epoch the row is known to have held."""
    reached = {final.epoch} if final.epoch is not None else set()
    for c in calls:
        if c.outcome != "ok":
            continue
        if c.op == "read" and c.result is not None:
            reached.add(int(c.result[0]))
        elif c.op in ("claim", "beat"):
            reached.add(c.epoch)
            if c.expected is not None:
                reached.add(c.expected)
    return reached


def _settle_conversation(n: int, calls: list[Call], final: Readback, s: Settlement) -> None:
    seen = Counter(final.ids)
    for mid, times in seen.items():
        if times > 1:
            s.twice += times - 1
            s._example(f"conversation {n}: message {mid} stored {times} times")
    reached = _reached(calls, final)
    acked_claims = Counter(c.epoch for c in calls if c.op == "claim" and c.outcome == "ok")
    open_claims = Counter(c.epoch for c in calls if c.op == "claim" and c.outcome == "unknown")
    # A claim to a reached E that only one unknown claim can explain landed, so its
    # expected epoch was reached too (the row went through it on the way to E).
    grew = True
    while grew:
        grew = False
        for c in calls:
            sole = c.op == "claim" and c.outcome == "unknown" and c.epoch in reached
            sole = sole and acked_claims[c.epoch] == 0 and open_claims[c.epoch] == 1
            if sole and c.expected is not None and c.expected not in reached:
                reached.add(c.expected)
                grew = True
    for c in calls:
        if c.outcome == "ok" or (c.outcome == "refused" and c.op != "append" and c.op != "claim"):
            continue
        landed: bool | None
        if c.op == "append":
            times = seen.get(c.item, 0)
            how = "twice" if times > 1 else "landed" if times == 1 else "not_landed"
            landed = times > 0
        elif c.op == "claim":
            if c.outcome == "refused":
                # a False or a typed refusal: the row must not have moved to E by it
                landed = c.epoch in reached and acked_claims[c.epoch] == 0
                landed = landed and open_claims[c.epoch] == 0
                how = "landed" if landed else "not_landed"
            elif c.epoch not in reached or acked_claims[c.epoch] > 0:
                how, landed = "not_landed", False
            elif open_claims[c.epoch] > 1:
                how, landed = "rival", None
            else:
                how, landed = "landed", True
        elif c.op == "state":
            landed = final.state == (c.epoch, c.item) or None
            how = "landed" if landed else "overwritten"
        else:
            how, landed = "no_effect", None
        if c.outcome == "refused" or c.error == NOTHING_SENT:
            if landed:
                s.denied_but_landed += 1
                s._example(f"conversation {n}: {c.op} {c.item or c.epoch} {c.error} yet landed")
            if c.outcome == "refused":
                continue
        s.settled[f"{c.op} {how}"] += 1
