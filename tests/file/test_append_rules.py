"""The append path's rules on files: a transcript's ``created_at`` never goes back when
the store clock steps back right after its first message, and a write refused by an
erased key's tombstone reports no fence the key never had (a refusal's context holds
only what the store knew)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentstores.errors import ErasedError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_file.stores import FileStores

from .conftest import ManualClock

P = "p"


async def test_the_second_message_is_not_stamped_before_the_first(
    tmp_path: Path, clock: ManualClock
) -> None:
    """``created_at`` never decreases along a transcript (conversations.order), from its
    very first message on: when the store clock steps back after a one-message
    transcript, the next append is stamped no earlier than that message."""
    async with FileStores(f"file://{tmp_path / 'store'}", clock=clock, fsync=False) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "one")
        (first,) = await conv.append_messages(key, P, [Message("a", "user", "a")])
        clock.advance(-60)  # the clock steps back behind the only message
        (second,) = await conv.append_messages(key, P, [Message("b", "assistant", "b")])
        assert second.created_at == first.created_at, "the second message went back in time"
        stored = [(m.id, m.created_at) for m in await conv.read_messages(key, P)]
        assert stored == [("a", first.created_at), ("b", first.created_at)]


async def test_a_tombstones_refusal_reports_no_fence_the_key_never_had(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A write to an erased key is refused with ``ErasedError``; a key that never saw an
    epoch has fence 0, and the refusal's context (only what the store knew) reports no
    fence above it."""
    async with FileStores(f"file://{tmp_path / 'store'}", clock=clock, fsync=False) as stores:
        key = ConversationKey("t", "erased")
        await stores.conversations.append_messages(key, P, [Message("a", "user", "a")])
        assert await stores.conversations.delete(key, P)
        with pytest.raises(ErasedError) as erased:
            await stores.state.save(key, P, {"x": 1})
        assert erased.value.key == key
        assert erased.value.context.get("fence", 0) == 0, erased.value.context
