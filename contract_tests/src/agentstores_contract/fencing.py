"""Fencing: after a takeover at epoch e+1, every write carrying epoch <= e is refused."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from agentstores.errors import FencedError, NotFoundError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .promises import promise
from .scenarios import TURN, check_fenced, populate, snapshot

Write = Callable[[Stores, ConversationKey, str, "int | None", str], Awaitable[Any]]
"""``write(stores, key, principal, epoch, tag)``: one mutating call; ``tag`` keeps ids unique."""

OLD, NEW = 3, 4
"""The stale holder's epoch and the taker-over's."""


async def _cas(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    assert e is not None
    return await s.supervision.compare_and_swap(k, p, NEW, SupervisionRow("running", tag, e))


async def _recording_put(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    assert e is not None
    return await s.recording.put(k, p, RecordedEvent(99, {"late": tag}, TURN, e))


async def _recording_delete(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    return await s.recording.delete(k, p, TURN, epoch=e)


async def _state_save(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    return await s.state.save(k, p, {"late": tag}, epoch=e)


async def _state_delete(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    return await s.state.delete(k, p, epoch=e)


async def _append(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    return await s.conversations.append_messages(k, p, [Message(tag, "assistant", "late")], epoch=e)


async def _append_lone(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    info = await s.conversations.get_conversation(k, p)
    tail = info.tail_message_id if info is not None else None
    return await s.conversations.append_messages(
        k, p, [Message(tag, "tool", "late")], expected_tail=tail, epoch=e
    )


async def _status(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    return await s.conversations.set_last_turn_status(k, p, "errored", epoch=e)


async def _title(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    return await s.conversations.set_title(k, p, tag, epoch=e)


async def _metadata(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    return await s.conversations.set_metadata(k, p, {"agent": tag}, epoch=e)


async def _truncate(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    return await s.conversations.truncate(k, p, "a1", epoch=e)


async def _token_put(s: Stores, k: ConversationKey, p: str, e: int | None, tag: str) -> Any:
    later = await s.now() + timedelta(hours=1)
    return await s.pause_tokens.put(tag, k, p, {"late": True}, later, epoch=e)


FENCED_WRITES: dict[str, Write] = {
    "supervision.cas": _cas,
    "recording.put": _recording_put,
    "recording.delete": _recording_delete,
    "state.save": _state_save,
    "state.delete": _state_delete,
    "conversations.append": _append,
    "conversations.append.lone": _append_lone,
    "conversations.set_last_turn_status": _status,
    "conversations.set_title": _title,
    "conversations.set_metadata": _metadata,
    "conversations.truncate": _truncate,
    "pause_tokens.put": _token_put,
}
ALWAYS_FENCED = {"supervision.cas", "recording.put"}
"""Writes whose epoch is part of the record, so they cannot be sent without one."""


async def taken_over(stores: Stores, key: ConversationKey, owner: str) -> None:
    """Populate at epoch OLD, then take the lease over at NEW."""
    await populate(stores, key, owner, OLD)
    assert await stores.supervision.compare_and_swap(
        key, owner, OLD, SupervisionRow("running", "turn-2", NEW)
    ), "setting up: the takeover CAS must succeed"


async def refused(write: Awaitable[Any], epoch: int, what: str) -> None:
    """A fenced write at ``epoch`` raises FencedError (naming the epoch and a fence above
    it) or returns False."""
    try:
        result = await write
    except FencedError as exc:
        check_fenced(exc, epoch, what)
        return
    if result is False:
        return
    raise AssertionError(f"{what} carrying a stale epoch was accepted (returned {result!r})")


class FencingContract(ContractBase):
    @pytest.mark.parametrize(
        "name", [pytest.param(n, marks=promise(f"fencing.{n}"), id=n) for n in FENCED_WRITES]
    )
    def test_stale_epoch_is_refused(self, backend: BackendUnderTest, name: str) -> None:
        write = FENCED_WRITES[name]
        key = self.key()

        async def body(stores: Stores) -> None:
            await taken_over(stores, key, "owner")
            before = await snapshot(stores, key, "owner")
            for stale in (OLD, OLD - 1, 0):
                await refused(
                    write(stores, key, "owner", stale, f"stale-{stale}"),
                    stale,
                    f"{name} at epoch {stale} after a takeover at {NEW}",
                )
                after = await snapshot(stores, key, "owner")
                assert after == before, f"a refused {name} at epoch {stale} changed the data"
            if name == "pause_tokens.put":
                for stale in (OLD, OLD - 1, 0):
                    try:
                        await stores.pause_tokens.claim(f"stale-{stale}", key, "owner")
                    except NotFoundError:
                        continue
                    raise AssertionError("a refused pause_tokens.put created its token")
            result = await write(stores, key, "owner", NEW, "current")
            assert result is not False, f"{name} at the current epoch {NEW} must be accepted"
            assert (await stores.supervision.read(key, "owner")).fence == NEW

        self.run(backend, body)

    @promise("fencing.unfenced")
    def test_writes_without_epoch_are_not_fenced(self, backend: BackendUnderTest) -> None:
        async def body(stores: Stores) -> None:
            for name, write in FENCED_WRITES.items():
                if name in ALWAYS_FENCED:
                    continue
                key = self.key()
                await taken_over(stores, key, "owner")
                try:
                    result = await write(stores, key, "owner", None, "unfenced")
                except FencedError as exc:
                    raise AssertionError(f"{name} without an epoch was fenced: {exc}") from exc
                assert result is not False, f"{name} without an epoch was refused"
                view = await stores.supervision.read(key, "owner")
                assert view.fence == NEW, f"{name} without an epoch moved the fence to {view.fence}"
                await refused(_state_save(stores, key, "owner", OLD, "x"), OLD, "state.save after")
                await stores.state.save(key, "owner", {"ok": 1}, epoch=NEW)

        self.run(backend, body)

    @promise("fencing.cross_store")
    def test_any_store_raises_the_fence_for_all(self, backend: BackendUnderTest) -> None:
        async def body(stores: Stores) -> None:
            key = self.key()
            await stores.state.save(key, "p", {"v": 1}, epoch=7)
            assert not await stores.supervision.compare_and_swap(
                key, "p", None, SupervisionRow("running", "m", 6)
            ), "a lease below an epoch written through the state store"
            await refused(
                stores.recording.put(key, "p", RecordedEvent(0, "x", "m", 6)),
                6,
                "recording.put below the state store's epoch",
            )
            await refused(_append(stores, key, "p", 6, "m6"), 6, "append below the state's epoch")
            assert await stores.supervision.compare_and_swap(
                key, "p", None, SupervisionRow("running", "m", 7)
            )
            other = self.key()
            await stores.conversations.append_messages(
                other, "p", [Message("m", "user", 1)], epoch=9
            )
            await refused(_state_save(stores, other, "p", 8, "x"), 8, "state.save below an append")
            await refused(_token_put(stores, other, "p", 8, "t"), 8, "pause put below an append")
            assert (await stores.supervision.read(other, "p")).fence == 9

        self.run(backend, body)

    @promise("fencing.read_fence")
    def test_fence_survives_row_delete(self, backend: BackendUnderTest) -> None:
        key = self.key()

        async def body(stores: Stores) -> None:
            sup = stores.supervision
            assert (await sup.read(key, "p")).fence == 0
            assert await sup.compare_and_swap(key, "p", None, SupervisionRow("running", "m", 5))
            assert await sup.delete(key, "p", "m", 5)
            view = await sup.read(key, "p")
            assert view.row is None and view.fence == 5, f"read after delete gave {view}"
            assert not await sup.compare_and_swap(
                key, "p", None, SupervisionRow("running", "n", 4)
            ), "a new lease below the fence of a deleted row"
            assert await sup.compare_and_swap(key, "p", None, SupervisionRow("running", "n", 6))

        self.run(backend, body)
