"""Set-ups and read-backs shared by the targeted tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores


async def raises(error: type[BaseException], awaitable: Any, what: str) -> BaseException:
    try:
        await awaitable
    except error as exc:
        return exc
    raise AssertionError(f"{what}: expected {error.__name__}")


TURN = "turn-1"
TOKEN = "token-1"


async def populate(stores: Stores, key: ConversationKey, owner: str, epoch: int) -> None:
    """Put something in every conversation-keyed store, as a turn holding ``epoch``."""
    assert await stores.supervision.compare_and_swap(
        key, owner, None, SupervisionRow("running", TURN, epoch)
    ), "setting up: the first supervision CAS on a fresh key must succeed"
    await stores.conversations.append_messages(
        key,
        owner,
        [
            Message("u1", "user", "hello"),
            Message("a1", "assistant", {"text": "hi"}),
            Message("u2", "user", "more"),
            Message("a2", "assistant", "sure"),
        ],
        title="first",
        epoch=epoch,
    )
    await stores.state.save(key, owner, {"step": 1, "notes": ["a"]}, epoch=epoch)
    assert await stores.recording.put(
        key, owner, RecordedEvent(3, {"partial": "so far"}, TURN, epoch)
    )
    await stores.pause_tokens.put(
        TOKEN, key, owner, {"resume": True}, await stores.now() + timedelta(hours=1), epoch=epoch
    )


@dataclass(frozen=True)
class Snapshot:
    """Everything a principal can read under a key (tokens excepted: reading claims them)."""

    supervision: Any
    fence: int
    recording: Any
    state: Any
    messages: Any
    info: Any


async def snapshot(stores: Stores, key: ConversationKey, principal: str) -> Snapshot:
    view = await stores.supervision.read(key, principal)
    row = view.row
    messages = await stores.conversations.read_messages(key, principal)
    info = await stores.conversations.get_conversation(key, principal)
    return Snapshot(
        supervision=None
        if row is None
        else (row.status, row.message_id, row.epoch, row.owner, row.heartbeat_at),
        fence=view.fence,
        recording=await stores.recording.read(key, principal),
        state=await stores.state.load(key, principal),
        messages=[
            (m.seq, m.id, m.role, m.content, dict(m.metadata), m.compaction, m.created_at)
            for m in messages
        ],
        info=info,
    )


ABSENT_READS = Snapshot(None, 0, None, {}, [], None)
"""What every read gives for a key nobody wrote (or one invisible to the reader)."""
