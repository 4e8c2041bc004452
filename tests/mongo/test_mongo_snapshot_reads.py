"""A transcript read whose header was taken before a truncation committed and cut: it
answers from one committed state (here the truncated one), never from the old header
joined to documents the cut removed."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_mongo.conversations import MongoConversationStore
from agentstores_mongo.stores import MongoStores
from tests.servers.mongo import Installation, NxServer

P = "p"
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def nx_installed(nx_server: NxServer) -> Iterator[Installation]:
    with Installation(nx_server.url) as inst:
        yield inst


@pytest.fixture
async def truncated_mid_read(
    nx_installed: Installation, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[MongoStores, ConversationKey]]:
    """Stores whose next transcript read, right after it read the header, sees a
    truncation at ``u1`` commit and cut (made through a second bundle)."""
    key = ConversationKey("snapshot", uuid.uuid4().hex)
    async with MongoStores(nx_installed.url) as reader, MongoStores(nx_installed.url) as writer:
        await reader.conversations.append_messages(
            key,
            P,
            [
                Message(i, "user" if i[0] == "u" else "assistant", i)
                for i in ["u0", "a0", "u1", "a1"]
            ],
        )
        real = MongoConversationStore._visible
        armed = [True]

        async def visible_then_truncated(self: Any, *args: Any) -> Any:
            header = await real(self, *args)
            if armed and self is reader.conversations:
                armed.clear()
                assert await writer.conversations.truncate(key, P, "u1") == 2
            return header

        monkeypatch.setattr(MongoConversationStore, "_visible", visible_then_truncated)
        yield reader, key


async def test_speaker_index_after_a_cut(
    truncated_mid_read: tuple[MongoStores, ConversationKey],
) -> None:
    stores, key = truncated_mid_read
    rows = await stores.conversations.get_transcript(key, P, index=-1, speaker="user")
    assert [row.id for row in rows] == ["u0"]


async def test_recent_after_a_cut(truncated_mid_read: tuple[MongoStores, ConversationKey]) -> None:
    stores, key = truncated_mid_read
    assert [m.id for m in await stores.conversations.recent(key, P, 10)] == ["u0", "a0"]


async def test_whole_transcript_after_a_cut(
    truncated_mid_read: tuple[MongoStores, ConversationKey],
) -> None:
    stores, key = truncated_mid_read
    assert [m.id for m in await stores.conversations.read_messages(key, P)] == ["u0", "a0"]


async def test_tail_after_a_cut(truncated_mid_read: tuple[MongoStores, ConversationKey]) -> None:
    stores, key = truncated_mid_read
    found = await stores.conversations.tail(key, P, 10)
    assert found is not None and [m.id for m in found.messages] == ["u0", "a0"]
    assert (found.info.message_count, found.info.tail_message_id) == (2, "a0")
