"""Erasure: delete cascades through every store and leaves a tombstone."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from agentstores.errors import ConflictError, NotFoundError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .machines import AllStoresMachine, run_machine
from .promises import promise
from .scenarios import ABSENT_READS, TOKEN, populate, raises, snapshot

OWNER = "owner"


async def _later(s: Stores) -> Any:
    return await s.now() + timedelta(hours=1)


async def _token_put(s: Stores, k: ConversationKey, p: str) -> Any:
    return await s.pause_tokens.put("late", k, p, "late", await _later(s), epoch=9)


LATE_WRITES: dict[str, Callable[[Stores, ConversationKey, str], Awaitable[Any]]] = {
    "supervision.cas": lambda s, k, p: s.supervision.compare_and_swap(
        k, p, None, SupervisionRow("running", "late", 9)
    ),
    "supervision.cas_from_old_epoch": lambda s, k, p: s.supervision.compare_and_swap(
        k, p, 1, SupervisionRow("running", "late", 9)
    ),
    "recording.put": lambda s, k, p: s.recording.put(k, p, RecordedEvent(0, "late", "late", 9)),
    "state.save": lambda s, k, p: s.state.save(k, p, {"late": True}, epoch=9),
    "state.save_unfenced": lambda s, k, p: s.state.save(k, p, {"late": True}),
    "conversations.append": lambda s, k, p: s.conversations.append_messages(
        k, p, [Message("late", "assistant", "late")], epoch=9
    ),
    "conversations.append_unfenced": lambda s, k, p: s.conversations.append_messages(
        k, p, [Message("late", "assistant", "late")]
    ),
    "conversations.append_expecting_empty": lambda s, k, p: s.conversations.append_messages(
        k, p, [Message("late", "assistant", "late")], expected_tail=None
    ),
    "conversations.append_existing": lambda s, k, p: s.conversations.append_messages(
        k, p, [Message("late", "assistant", "late")], create_if_absent=False
    ),
    "conversations.set_last_turn_status": lambda s, k, p: s.conversations.set_last_turn_status(
        k, p, "complete"
    ),
    "conversations.set_title": lambda s, k, p: s.conversations.set_title(k, p, "late"),
    "conversations.branch_onto": lambda s, k, p: s.conversations.branch(
        ConversationKey(k.tenant, "source"), p, "m", new_session_id=k.session_id
    ),
    "pause_tokens.put": _token_put,
}
NO_OP_AFTER_ERASURE = {"conversations.set_last_turn_status"}
"""Documented as a no-op on a missing key; on a tombstone it stays one."""
REFUSALS: dict[str, tuple[type[Exception], ...]] = {
    "conversations.branch_onto": (ConflictError, NotFoundError),
}
"""How a late write may be refused besides ErasedError (a NotFoundError)."""


class ErasureContract(ContractBase):
    @promise("erasure.model")
    def test_all_stores_model(self, backend: BackendUnderTest) -> None:
        run_machine(backend, AllStoresMachine, self.profile.hypothesis())

    @promise("erasure.cascade")
    def test_delete_removes_everything(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            await populate(stores, key, OWNER, 2)
            await stores.conversations.share(key, OWNER, "reader")
            assert await stores.conversations.delete(key, OWNER)
            for who in (OWNER, "reader"):
                seen = await snapshot(stores, key, who)
                assert seen == ABSENT_READS, f"after erasure {who!r} still reads {seen}"
            await raises(
                NotFoundError,
                stores.pause_tokens.claim(TOKEN, key, OWNER),
                "a pause token survived erasure",
            )
            assert (await stores.conversations.list_conversations(key.tenant, OWNER)).items == []
            assert not await stores.conversations.delete(key, OWNER), "erasing twice"

        self.run(backend, body)

    @pytest.mark.parametrize("name", list(LATE_WRITES))
    @promise("erasure.tombstone")
    def test_late_writes_are_refused(self, backend: BackendUnderTest, name: str) -> None:
        key = self.key()
        write = LATE_WRITES[name]

        async def body(stores: Stores) -> None:
            await stores.conversations.append_messages(
                ConversationKey(key.tenant, "source"), OWNER, [Message("m", "user", 1)]
            )
            await populate(stores, key, OWNER, 1)
            assert await stores.conversations.delete(key, OWNER)
            for who in (OWNER, "someone-else"):
                try:
                    result = await write(stores, key, who)
                except REFUSALS.get(name, (NotFoundError,)):
                    pass
                except Exception as exc:
                    if who == OWNER:
                        raise AssertionError(
                            f"late {name} raised {type(exc).__name__}, not ErasedError"
                        ) from exc
                else:
                    if name not in NO_OP_AFTER_ERASURE:
                        assert result is False, f"late {name} by {who!r} was accepted ({result!r})"
                for reader in (OWNER, who):
                    seen = await snapshot(stores, key, reader)
                    assert seen == ABSENT_READS, f"late {name} by {who!r} recreated data: {seen}"
                await raises(
                    NotFoundError,
                    stores.pause_tokens.claim("late", key, OWNER),
                    "a late pause token",
                )
            listed = await stores.conversations.list_conversations(key.tenant, OWNER)
            assert [i.key.session_id for i in listed.items] == ["source"]

        self.run(backend, body)

    @promise("erasure.absent")
    def test_deleting_an_absent_key(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            assert not await stores.conversations.delete(key, OWNER)
            await stores.conversations.append_messages(key, "newcomer", [Message("m", "user", 1)])
            info = await stores.conversations.get_conversation(key, "newcomer")
            assert info is not None and info.owner == "newcomer", (
                "deleting an absent key must leave no tombstone (nor claim it)"
            )

        self.run(backend, body)
