"""conv_append's two paths (``sql/functions/conv_append.sql``): one message that is not a
speaker's, on an expected tail, is one statement that lands only when every rule lets it
through; any other case, and any refusal, goes through the rules one by one. Both must
give what the rules give, also when appends race."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agentstores.errors import (
    ErasedError,
    FencedError,
    NotOwnedError,
    StaleWriteError,
    UsageError,
)
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.stores import MAX_CONVERSATION_METADATA_BYTES
from agentstores_postgres.stores import PostgresStores

from .conftest import PgServer

P = "owner"


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


def _row(i: int) -> Message:
    return Message(f"r{i}", "other", {"n": i}, {"kind": "row"})


async def test_every_refusal_of_a_single_row_on_a_tail_is_the_rules_one(pg: PgServer) -> None:
    key = _key()
    async with PostgresStores(pg.url) as stores:
        conv = stores.conversations
        await conv.append_messages(key, P, [_row(0)], epoch=5, metadata={"a": 1})
        with pytest.raises(FencedError) as fenced:
            await conv.append_messages(key, P, [_row(1)], expected_tail="r0", epoch=4)
        assert fenced.value.fence == 5
        with pytest.raises(NotOwnedError):
            await conv.append_messages(key, "other", [_row(1)], expected_tail="r0")
        with pytest.raises(StaleWriteError):
            await conv.append_messages(key, P, [_row(1)], expected_tail="r9")
        # within the limit alone, over it merged with "a": refused by the server
        big = {"big": "x" * (MAX_CONVERSATION_METADATA_BYTES - 6)}
        with pytest.raises(UsageError):
            await conv.append_messages(key, P, [_row(1)], expected_tail="r0", metadata=big)
        # an id already present is a no-op, whatever the tail
        assert await conv.append_messages(key, P, [_row(0)], expected_tail="r9") == []
        # an epoch above the fence lands and raises it; a name set to None is removed
        stored = await conv.append_messages(
            key, P, [_row(1)], expected_tail="r0", epoch=7, metadata={"a": None}
        )
        assert [(m.id, m.seq) for m in stored] == [("r1", 1)]
        with pytest.raises(FencedError):
            await conv.append_messages(key, P, [_row(2)], expected_tail="r1", epoch=6)
        stored = await conv.append_messages(
            key, P, [_row(2)], expected_tail="r1", epoch=7, metadata={"b": 2}
        )
        assert [(m.id, m.seq) for m in stored] == [("r2", 2)]
        info = await conv.get_conversation(key, P)
        assert info is not None
        assert (info.message_count, info.tail_message_id) == (3, "r2")
        assert dict(info.metadata) == {"b": 2}
        assert stored[0].created_at == info.updated_at
        await conv.delete(key, P)
        with pytest.raises(ErasedError):
            await conv.append_messages(key, P, [_row(3)], expected_tail="r2", epoch=7)


async def test_racing_single_rows_on_one_tail_land_one_at_a_time(pg: PgServer) -> None:
    """Every round, every client appends its own row on the same tail: exactly one lands,
    the others are told the tail moved, and positions stay dense."""
    key = _key()
    clients = 6
    async with PostgresStores(pg.url, pool_max_size=clients) as stores:
        conv = stores.conversations
        await conv.append_messages(key, P, [_row(0)])
        tail = "r0"
        for r in range(1, 6):

            async def one(i: int, expected: str = tail, r: int = r) -> str | None:
                message = Message(f"r{r}c{i}", "other", i)
                try:
                    await conv.append_messages(key, P, [message], expected_tail=expected)
                except StaleWriteError:
                    return None
                return message.id

            won = [w for w in await asyncio.gather(*(one(i) for i in range(clients))) if w]
            assert len(won) == 1, won
            tail = won[0]
        stored = await conv.read_messages(key, P)
        assert [m.seq for m in stored] == list(range(6))
        assert stored[-1].id == tail


async def test_racing_first_appends_create_the_conversation_once(pg: PgServer) -> None:
    """Clients append at once to conversations that do not exist yet: the one that claims
    the header creates it, and every other append lands after it, at its own position
    (a header committed between the lock and the read must not be taken as locked)."""
    clients = 8
    async with PostgresStores(pg.url, pool_max_size=clients) as stores:
        conv = stores.conversations
        for _ in range(40):
            key = _key()

            async def writer(i: int, key: ConversationKey = key) -> None:
                for j in range(2):
                    await conv.append_messages(key, P, [Message(f"c{i}-{j}", "user", j)])

            await asyncio.gather(*(writer(i) for i in range(clients)))
            stored = await conv.read_messages(key, P)
            assert [m.seq for m in stored] == list(range(clients * 2))
            assert len({m.id for m in stored}) == clients * 2
