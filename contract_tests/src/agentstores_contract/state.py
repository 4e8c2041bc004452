"""AgentStateStore: the checkpoint a resumed turn is revived from."""

from __future__ import annotations

from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import StateMachine, run_machine
from .promises import promise

EIGHT_MIB = 8 * 1024 * 1024


def big_blob(size: int, seed: str) -> dict[str, object]:
    """A JSON object whose encoding is at least ``size`` bytes, with some non-ASCII."""
    chunk = f"{seed}-é-日本-" * 64
    parts: list[str] = []
    total = 0
    while total < size:
        parts.append(chunk)
        total += len(chunk.encode("utf-8")) + 3
    return {"seed": seed, "parts": parts, "nested": {"n": len(parts)}}


class StateContract(ContractBase):
    @promise("state.model")
    def test_state_model(self, backend: BackendUnderTest) -> None:
        run_machine(backend, StateMachine, self.profile.hypothesis())

    @promise("state.large_blob")
    def test_eight_mib_blob_round_trips(self, backend: BackendUnderTest) -> None:
        key = self.key()
        first, second = big_blob(EIGHT_MIB, "one"), big_blob(EIGHT_MIB, "two")

        async def body(stores: Stores) -> None:
            await stores.state.save(key, "p", first, epoch=1)
            assert await stores.state.load(key, "p") == first, "an 8 MiB blob did not round-trip"
            await stores.state.save(key, "p", second, epoch=1)
            assert await stores.state.load(key, "p") == second, "replacing an 8 MiB blob"
            await stores.state.save(key, "p", {"small": True})
            assert await stores.state.load(key, "p") == {"small": True}, (
                "save replaces the whole blob"
            )
            await stores.state.delete(key, "p")
            assert await stores.state.load(key, "p") == {}

        self.run(backend, body)
