"""Set-ups and read-backs shared by the targeted tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agentstores.errors import FencedError, StaleWriteError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.stores import Stores


async def raises(error: type[BaseException], awaitable: Any, what: str) -> BaseException:
    try:
        await awaitable
    except error as exc:
        return exc
    raise AssertionError(f"{what}: expected {error.__name__}")


def check_fenced(exc: FencedError, epoch: int, what: str) -> None:
    """A ``FencedError`` names the epoch the refused write carried and a fence above it."""
    assert type(exc.epoch) is int and exc.epoch == epoch, (
        f"{what}: FencedError.epoch is {exc.epoch!r}, the write carried {epoch!r}"
    )
    assert type(exc.fence) is int and exc.fence > epoch, (
        f"{what}: FencedError.fence is {exc.fence!r}, not a fence above the epoch {epoch!r}"
    )


async def fenced(awaitable: Any, epoch: int, what: str) -> FencedError:
    """Await a write carrying ``epoch`` that must raise a ``FencedError`` saying so."""
    exc = await raises(FencedError, awaitable, what)
    assert isinstance(exc, FencedError)
    check_fenced(exc, epoch, what)
    return exc


def check_stale(exc: StaleWriteError, *, tail: str | None, expected: str | None, what: str) -> None:
    """A ``StaleWriteError`` names the tail it found and the tail the caller expected."""
    assert exc.tail == tail, f"{what}: StaleWriteError.tail is {exc.tail!r}, the tail is {tail!r}"
    assert exc.expected == expected, (
        f"{what}: StaleWriteError.expected is {exc.expected!r}, the caller expected {expected!r}"
    )


def check_stale_in_race(exc: StaleWriteError, expected: str | None, what: str) -> None:
    """:func:`check_stale` when racing writers leave the tail unknown: only not ``expected``."""
    assert exc.expected == expected, (
        f"{what}: StaleWriteError.expected is {exc.expected!r}, the caller expected {expected!r}"
    )
    assert exc.tail != expected, f"{what}: StaleWriteError.tail is the expected {expected!r}"


async def stale(
    awaitable: Any, *, tail: str | None, expected: str | None, what: str
) -> StaleWriteError:
    """Await a conditional append that must raise a ``StaleWriteError`` naming both tails."""
    exc = await raises(StaleWriteError, awaitable, what)
    assert isinstance(exc, StaleWriteError)
    check_stale(exc, tail=tail, expected=expected, what=what)
    return exc


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
        metadata={"agent": "first", "params": {"temperature": 0.5}},
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
