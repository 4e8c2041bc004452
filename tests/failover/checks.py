"""What a failover run did to the promises: the counts, read back through a fresh bundle.

- **acknowledged writes lost**: an acknowledged append whose message is missing from the
  transcript, or an acknowledged state save newer (by epoch, then seq) than the state
  the store ends with or than a load started after the save was acknowledged returned
  (so it was overwritten by an older one, or undone).
- **double winners**: a claim acknowledged at an epoch another acknowledged claim of the
  same conversation also won (each extra winner counts once).
- **fenced writes accepted**: an acknowledged write (append, state save, heartbeat) with
  epoch E invoked after a claim of the same conversation with an epoch above E was
  acknowledged (so it cannot be ordered before that claim).
- **unknown outcomes**: calls whose effect the client could not know.

Each conversation's supervision history (reads and compare-and-swaps) also goes through
the contract suite's Wing-Gong checker against a one-register model: True, False, or
None when the search ran out of budget.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agentstores.api import open_stores
from agentstores_contract.linearizability import CheckBudgetExceeded, Operation, check

from .workload import PRINCIPAL, Call, Result

WRITES = ("append", "state", "beat")


@dataclass
class Counts:
    """One run's figures (see the module docstring)."""

    calls: int = 0
    acked: int = 0
    unknown: int = 0
    claims_won: int = 0
    appends_lost: int = 0
    states_lost: int = 0
    double_winners: int = 0
    fenced_accepted: int = 0
    linearizable: list[bool | None] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        """Acknowledged writes lost: appends and state saves together."""
        return self.appends_lost + self.states_lost

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost}


@dataclass(frozen=True)
class Final:
    """One conversation as a fresh bundle reads it after the run."""

    messages: frozenset[str]
    state: tuple[int, int] | None


async def read_back(url: str, result: Result) -> dict[int, Final]:
    """Every conversation's transcript ids and state ``(epoch, seq)``, through a fresh bundle."""
    finals: dict[int, Final] = {}
    async with open_stores(url) as stores:
        for n in range(result.conversations):
            key = result.key(n)
            history = await stores.conversations.history(key, PRINCIPAL)
            state = await stores.state.load(key, PRINCIPAL)
            mark = (int(state["epoch"]), int(state["seq"])) if "epoch" in state else None
            finals[n] = Final(frozenset(m.id for m in history), mark)
    return finals


def count(result: Result, finals: dict[int, Final], *, budget: int = 300_000) -> Counts:
    """The counts of ``result``'s history against what was read back (``finals``)."""
    counts = Counts(calls=len(result.calls))
    by_conversation: dict[int, list[Call]] = defaultdict(list)
    for call in result.calls:
        by_conversation[call.conversation].append(call)
        counts.unknown += call.outcome == "unknown"
        counts.acked += call.outcome == "ok"
    for n in range(result.conversations):
        calls = by_conversation.get(n, [])
        final = finals[n]
        _count_conversation(n, calls, final, counts)
        counts.linearizable.append(linearizable(calls, budget=budget))
    return counts


def _count_conversation(n: int, calls: list[Call], final: Final, counts: Counts) -> None:
    ok = [c for c in calls if c.outcome == "ok"]
    loads = [c for c in ok if c.op == "load"]
    for c in ok:
        if c.op == "append" and c.item not in final.messages:
            counts.appends_lost += 1
            _example(counts, f"conversation {n}: acked append {c.item} missing")
        if c.op == "state":
            mark = (c.epoch, c.item)
            assert c.completed is not None
            seen = [final.state, *(_mark(x) for x in loads if x.invoked > c.completed)]
            older = [m for m in seen if m is None or m < mark]
            if older:
                counts.states_lost += 1
                _example(counts, f"conversation {n}: acked state {mark}, then read {older[0]}")
    winners: dict[int, int] = defaultdict(int)
    claims = [c for c in ok if c.op == "claim"]
    for c in claims:
        winners[c.epoch] += 1
    counts.claims_won += len(claims)
    for epoch, won in winners.items():
        if won > 1:
            counts.double_winners += won - 1
            _example(counts, f"conversation {n}: {won} claims won epoch {epoch}")
    for w in ok:
        if w.op not in WRITES:
            continue
        later = [
            c
            for c in claims
            if c.epoch > w.epoch and c.completed is not None and c.completed < w.invoked
        ]
        if later:
            counts.fenced_accepted += 1
            _example(
                counts,
                f"conversation {n}: {w.op} at epoch {w.epoch} acked after claim of epoch "
                f"{later[0].epoch}",
            )


def _mark(load: Call) -> tuple[int, int] | None:
    """A load's ``(epoch, seq)``, or None when it found no state."""
    return None if load.result is None else (int(load.result[0]), int(load.result[1]))


def _example(counts: Counts, text: str) -> None:
    if len(counts.examples) < 20:
        counts.examples.append(text)


def _step(state: int | None, call: Hashable) -> tuple[Hashable, int | None]:
    """The supervision row as one register of epochs: reads, and compare-and-swaps that
    win iff the row's epoch is the expected one and the new epoch is not below it."""
    assert isinstance(call, tuple)
    if call[0] == "read":
        return state, state
    _, expected, epoch = call
    if state == expected and (state is None or epoch >= state):
        return True, epoch
    return False, state


def supervision_history(calls: Sequence[Call]) -> list[Operation]:
    """A conversation's reads and compare-and-swaps as the checker's operations.
    A refused read has no effect and is left out; an unknown one may have happened."""
    ops = []
    for c in calls:
        if c.op == "read":
            if c.outcome != "ok":
                continue
            call: Hashable = ("read",)
            observed: Hashable = None if c.result is None else int(c.result[0])
        elif c.op in ("claim", "beat"):
            if c.outcome == "refused" and c.result is None:
                continue  # a typed refusal (not a False): nothing happened
            call = ("cas", c.expected, c.epoch)
            observed = c.result
        else:
            continue
        completed = c.completed if c.outcome != "unknown" else None
        ops.append(Operation(c.client * 100 + c.process, call, observed, c.invoked, completed))
    return ops


def linearizable(calls: Sequence[Call], *, budget: int = 300_000) -> bool | None:
    """Whether the conversation's supervision history is linearizable (None: undecided
    within ``budget`` configurations)."""
    ops = supervision_history(calls)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * len(ops) + 1000))
    try:
        return check(ops, None, _step, budget=budget).linearizable
    except CheckBudgetExceeded:
        return None
    finally:
        sys.setrecursionlimit(limit)
