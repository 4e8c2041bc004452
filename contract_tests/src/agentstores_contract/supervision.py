"""SupervisionStore: the liveness row, its CAS and its guarded delete."""

from __future__ import annotations

from agentstores.models import SupervisionRow
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import SupervisionMachine, run_machine
from .promises import promise


class SupervisionContract(ContractBase):
    @promise("supervision.model")
    def test_supervision_model(self, backend: BackendUnderTest) -> None:
        run_machine(backend, SupervisionMachine, self.profile.hypothesis())

    @promise("supervision.cas.create")
    def test_cas_creates_once_and_never_from_an_epoch(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            sup = stores.supervision
            row = SupervisionRow("running", "m1", 5)
            assert not await sup.compare_and_swap(key, "p", 4, row), (
                "a CAS expecting epoch 4 must not create a missing row"
            )
            assert (await sup.read(key, "p")).row is None
            assert await sup.compare_and_swap(key, "p", None, row)
            assert not await sup.compare_and_swap(
                key, "p", None, SupervisionRow("running", "m2", 6)
            ), "a CAS expecting no row must fail once the row exists"
            view = await sup.read(key, "p")
            assert view.row is not None
            assert (view.row.message_id, view.row.epoch, view.row.owner) == ("m1", 5, "p")
            assert view.fence == 5
            assert await sup.compare_and_swap(key, "p", 5, SupervisionRow("done", "m1", 5)), (
                "a CAS may keep the epoch (sealing a turn)"
            )
            assert (await sup.read(key, "p")).row.status == "done"  # type: ignore[union-attr]

        self.run(backend, body)

    @promise("supervision.delete.guarded")
    def test_delete_needs_exact_turn_and_epoch(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            sup = stores.supervision
            assert await sup.compare_and_swap(key, "p", None, SupervisionRow("running", "m1", 2))
            assert not await sup.delete(key, "p", "m2", 2), "delete with another message_id"
            assert not await sup.delete(key, "p", "m1", 1), "delete with another epoch"
            assert not await sup.delete(key, "p", "m1", 3), "delete with another epoch"
            assert (await sup.read(key, "p")).row is not None, "a refused delete removed the row"
            assert await sup.delete(key, "p", "m1", 2)
            view = await sup.read(key, "p")
            assert view.row is None
            assert not await sup.delete(key, "p", "m1", 2), "deleting twice"
            missing = self.key()
            assert not await sup.delete(missing, "p", "m1", 2), "deleting a missing row"

        self.run(backend, body)
