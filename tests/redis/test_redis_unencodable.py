"""A value with no RESP encoding (a lone surrogate, a bool) is found while packing, before
a connection is taken: the call fails as the caller's mistake (``Unencodable``, a
``UsageError`` at the store's edge), never as an unknown outcome, and no connection is
dropped. Core refuses such values first; these calls go around it, as an adapter bug or
a third party's store built on this client would."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentstores import ConversationKey, Message, UsageError
from agentstores_redis import client as client_module
from agentstores_redis.client import Unencodable
from agentstores_redis.lua import CONV_INFO, ST_SAVE
from agentstores_redis.stores import RedisStores

OWNER = "owner"
BAD: list[Any] = ["\ud800", "a\udfffb", True]


@pytest.fixture
def drops(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every connection the client drops, in order."""
    dropped: list[object] = []
    real = client_module._drop

    async def spy(conn: Any) -> None:
        dropped.append(conn)
        await real(conn)

    monkeypatch.setattr(client_module, "_drop", spy)
    return dropped


async def _client_id(s: RedisStores, key: ConversationKey) -> int:
    return int(await s.client.command(s.keys.conv(key).header, "CLIENT", "ID"))


@pytest.mark.parametrize("bad", BAD, ids=["surrogate", "inner surrogate", "bool"])
async def test_every_client_path_refuses_before_sending(
    url: str, bad: Any, drops: list[object]
) -> None:
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")
    s = RedisStores(url)
    async with s:
        c = s.client
        header = s.keys.conv(key).header
        await s.conversations.append_messages(key, OWNER, [Message("u1", "user", "hi")])
        first = await _client_id(s, key)
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "write": lambda: c.write(ST_SAVE, [header], ["nonce", OWNER, bad]),
            "write_many": lambda: c.write_many([(ST_SAVE, [header], ["nonce", OWNER, bad])]),
            "read": lambda: c.read(CONV_INFO, [header], [bad]),
            "many": lambda: c.many([(None, [header], ("GET", bad))]),
            "command": lambda: c.command(header, "GET", bad),
            "transaction": lambda: c.transaction(header, [("GET", bad)]),
        }
        for what, call in calls.items():
            try:
                result = await call()
            except Unencodable:
                continue
            assert isinstance(result, list) and isinstance(result[0], Unencodable), (
                f"{what}: {result!r}"
            )
        assert drops == [], "a value that was never sent dropped a connection"
        if not s.client.cluster:
            assert await _client_id(s, key) == first, "the connection was replaced"
        info = await s.conversations.get_conversation(key, OWNER)
        assert info is not None and info.message_count == 1


async def test_a_store_write_around_core_is_a_usage_error(url: str, drops: list[object]) -> None:
    """Through the store's own edge (its error translation), minus core's checks."""
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")
    s = RedisStores(url)
    async with s:
        conversations = s.conversations
        await conversations.append_messages(key, OWNER, [Message("u1", "user", "hi")], title="t")
        first = await _client_id(s, key)
        with pytest.raises(UsageError, match="nothing was sent"):
            async with conversations.translating_errors("conversations.set_title", key):
                await conversations._set_title(key, OWNER, "\ud800", None)
        assert drops == []
        if not s.client.cluster:
            assert await _client_id(s, key) == first
        await conversations.set_title(key, OWNER, "after")
        info = await conversations.get_conversation(key, OWNER)
        assert info is not None and info.title == "after"
