"""RecordingStore: one cumulative snapshot per conversation."""

from __future__ import annotations

from agentstores.errors import FencedError
from agentstores.models import RecordedEvent
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import RecordingMachine, run_machine
from .promises import promise
from .scenarios import check_fenced


class RecordingContract(ContractBase):
    @promise("recording.model")
    def test_recording_model(self, backend: BackendUnderTest) -> None:
        run_machine(backend, RecordingMachine, self.profile.hypothesis())

    @promise("recording.monotonic")
    def test_late_flushes_never_roll_back(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            rec = stores.recording
            assert await rec.put(key, "p", RecordedEvent(5, "hello wor", "m1", 2))
            assert not await rec.put(key, "p", RecordedEvent(4, "hello", "m1", 2)), (
                "a lower index for the same turn and epoch must return False"
            )
            assert await rec.read(key, "p") == RecordedEvent(5, "hello wor", "m1", 2)
            assert await rec.put(key, "p", RecordedEvent(5, "hello world", "m1", 2)), (
                "the same index may be rewritten"
            )
            assert await rec.put(key, "p", RecordedEvent(6, "hello world!", "m1", 2))
            try:
                await rec.put(key, "p", RecordedEvent(9, "stale", "m1", 1))
            except FencedError as exc:
                check_fenced(exc, 1, "a put below the stored epoch")
            else:
                raise AssertionError("a put below the stored epoch must raise FencedError")
            assert await rec.read(key, "p") == RecordedEvent(6, "hello world!", "m1", 2)
            assert await rec.put(key, "p", RecordedEvent(0, "new turn", "m2", 3)), (
                "a new epoch starts again from index 0"
            )
            assert await rec.read(key, "p") == RecordedEvent(0, "new turn", "m2", 3)

        self.run(backend, body)

    @promise("recording.delete.guarded")
    def test_delete_only_for_its_turn(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            rec = stores.recording
            assert await rec.put(key, "p", RecordedEvent(1, ["x"], "m1", 0))
            assert not await rec.delete(key, "p", "m2"), "delete for another turn"
            assert await rec.read(key, "p") is not None
            assert await rec.delete(key, "p", "m1")
            assert await rec.read(key, "p") is None
            assert not await rec.delete(key, "p", "m1")

        self.run(backend, body)
