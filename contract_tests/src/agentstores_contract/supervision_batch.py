"""SupervisionStore.compare_and_swap_many: many CAS in one call, each row on its own."""

from __future__ import annotations

import pytest

from agentstores.errors import FencedError, NotOwnedError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import RecordedEvent, SupervisionRow, Swap, SwapOutcome
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise


def _row(mid: str, epoch: int, status: str = "running") -> SupervisionRow:
    return SupervisionRow(status, mid, epoch)  # type: ignore[arg-type]


_NAMES = ("beat", "take", "stale", "fenced", "other", "erased", "new", "absent")
_OUTCOMES = {
    "beat": (True, None),
    "take": (True, None),
    "stale": (False, None),
    "fenced": (False, None),
    "other": (False, "NotOwnedError"),
    "erased": (False, None),
    "new": (True, None),
    "absent": (False, None),
}
"""What each single CAS of :func:`_rows` gives: a batch row must give the same."""


async def _rows(stores: Stores, k: dict[str, ConversationKey]) -> list[Swap]:
    """One key per kind of outcome, set up, and the swap each gets."""
    sup = stores.supervision
    assert await sup.compare_and_swap(k["beat"], "p", None, _row("m", 1))
    assert await sup.compare_and_swap(k["take"], "p", None, _row("m", 2))
    assert await sup.compare_and_swap(k["stale"], "p", None, _row("m", 2))
    assert await sup.compare_and_swap(k["fenced"], "p", None, _row("m", 5))
    await stores.state.save(k["fenced"], "p", {"x": 1}, epoch=9)
    assert await sup.compare_and_swap(k["other"], "q", None, _row("m", 1))
    assert await sup.compare_and_swap(k["erased"], "p", None, _row("m", 1))
    assert await stores.conversations.delete(k["erased"], "p")
    return [
        Swap(k["beat"], "p", 1, _row("m", 1)),
        Swap(k["take"], "p", 2, _row("t", 3)),
        Swap(k["stale"], "p", 1, _row("s", 2)),
        Swap(k["fenced"], "p", 5, _row("m", 5)),
        Swap(k["other"], "p", 1, _row("m", 1)),
        Swap(k["erased"], "p", 1, _row("m", 2)),
        Swap(k["new"], "p", None, _row("n", 4)),
        Swap(k["absent"], "p", 3, _row("a", 4)),
    ]


def _outcome(o: SwapOutcome) -> tuple[object, str | None]:
    return o.swapped, type(o.error).__name__ if o.error else None


class SupervisionBatchContract(ContractBase):
    @promise("supervision.cas_many.rows")
    def test_each_row_is_its_own_cas(self, backend: BackendUnderTest) -> None:
        tenant = self.tenant("batch")
        k = {name: ConversationKey(tenant, name) for name in _NAMES}

        async def body(stores: Stores) -> None:
            sup = stores.supervision
            swaps = await _rows(stores, k)
            before = (await sup.read(k["beat"], "p")).row
            assert before is not None
            outcomes = await sup.compare_and_swap_many(swaps)
            got = {s.key.session_id: _outcome(o) for s, o in zip(swaps, outcomes, strict=True)}
            assert got == _OUTCOMES, (
                f"per-row outcomes differ from what each single CAS would give: {got}"
            )
            other = outcomes[4]
            with pytest.raises(NotOwnedError):
                other.result()
            assert other.error is not None and other.error.key == k["other"]

            beat = (await sup.read(k["beat"], "p")).row
            assert beat is not None and beat.heartbeat_at is not None
            assert before.heartbeat_at is not None and beat.heartbeat_at >= before.heartbeat_at
            take = await sup.read(k["take"], "p")
            assert take.row is not None and (take.row.message_id, take.row.epoch) == ("t", 3)
            assert take.fence == 3, "a batch row raises the key's fence like a single CAS"
            stale = (await sup.read(k["stale"], "p")).row
            assert stale is not None and (stale.message_id, stale.epoch) == ("m", 2)
            fenced = (await sup.read(k["fenced"], "p")).row
            assert fenced is not None and fenced.epoch == 5
            assert (await sup.read(k["erased"], "p")).row is None
            new = (await sup.read(k["new"], "p")).row
            assert new is not None and (new.message_id, new.epoch, new.owner) == ("n", 4, "p")
            assert (await sup.read(k["absent"], "p")).row is None, "a batch row created a row"
            with pytest.raises(FencedError):
                await stores.recording.put(k["take"], "p", RecordedEvent(1, {}, "x", 2))
            with pytest.raises(NotOwnedError):
                await sup.compare_and_swap(k["new"], "q", 4, _row("n", 4))

        self.run(backend, body)

    @promise("supervision.cas_many.rows")
    def test_a_batch_of_one_row_is_its_own_cas(self, backend: BackendUnderTest) -> None:
        """Each kind of outcome through a batch of one row (a backend may take another
        path for one row than for many: the outcome must not differ)."""
        tenant = self.tenant("batch-of-one")
        k = {name: ConversationKey(tenant, name) for name in _NAMES}

        async def body(stores: Stores) -> None:
            got: dict[str, tuple[object, str | None]] = {}
            for swap in await _rows(stores, k):
                [outcome] = await stores.supervision.compare_and_swap_many([swap])
                got[swap.key.session_id] = _outcome(outcome)
                if outcome.error is not None:
                    assert outcome.error.key == swap.key, "a row's error names another key"
            assert got == _OUTCOMES, (
                f"a batch of one row differs from the single CAS it stands for: {got}"
            )

        self.run(backend, body)

    @promise("supervision.cas_many.validation")
    def test_malformed_batches_are_refused_whole(self, backend: BackendUnderTest) -> None:
        key, other = self.key("a"), self.key("b")

        async def body(stores: Stores) -> None:
            sup = stores.supervision
            assert await sup.compare_and_swap(key, "p", None, _row("m", 1))
            good = Swap(key, "p", 1, _row("m", 2))
            bad: list[object] = [
                [good, "not a swap"],
                [good, Swap(other, "p", -1, _row("m", 1))],
                [good, Swap(other, "bad\x00principal", None, _row("m", 1))],
                [good, Swap("not a key", "p", None, _row("m", 1))],  # type: ignore[arg-type]
                [good, Swap(other, "p", None, "not a row")],  # type: ignore[arg-type]
                [good, Swap(key, "p", 1, _row("m", 3))],
                "not a sequence",
            ]
            for swaps in bad:
                with pytest.raises(UsageError):
                    await sup.compare_and_swap_many(swaps)  # type: ignore[arg-type]
            row = (await sup.read(key, "p")).row
            assert row is not None and row.epoch == 1, "a refused batch changed a row"
            assert (await sup.read(other, "p")).row is None
            assert await sup.compare_and_swap_many([]) == []

        self.run(backend, body)
