"""The user-side API's pure parts: message constructors, the ambient epoch, turn text."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from agentstores import ConversationKey, Message, UsageError, open_stores
from agentstores.models import StoredMessage
from agentstores.protocol import is_turn, message_text
from agentstores.stores.ambient import ambient_epoch, fenced_as, write_epoch

KEY = ConversationKey("acme", "s-1")
OTHER = ConversationKey("acme", "s-2")


def test_constructors_mint_fresh_ids_and_keep_given_ones() -> None:
    a, b = Message.user("hi"), Message.user("hi")
    assert a.id != b.id and a.role == "user" and a.content == "hi"
    assert Message.user("hi", id="m1").id == "m1"
    assert Message.assistant({"text": "x"}).role == "assistant"
    assert Message.system("be brief").role == "system"
    tool = Message.tool({"rows": 3}, call_id="c1", name="search", metadata={"ms": 4})
    assert tool.role == "tool" and tool.metadata == {
        "ms": 4,
        "tool_call_id": "c1",
        "tool_name": "search",
    }
    assert Message.tool("x").metadata == {}
    with pytest.raises(UsageError):
        Message.user("hi", id="bad\x00id")


def test_ambient_epoch_is_per_key_and_scoped() -> None:
    assert ambient_epoch(KEY) is None and write_epoch(KEY, None) is None
    with fenced_as(KEY, 7):
        assert write_epoch(KEY, None) == 7
        assert write_epoch(KEY, 3) == 3  # an explicit epoch wins
        assert write_epoch(OTHER, None) is None
        with fenced_as(OTHER, 9):
            assert (ambient_epoch(KEY), ambient_epoch(OTHER)) == (7, 9)
        assert ambient_epoch(OTHER) is None
    assert ambient_epoch(KEY) is None


def test_ambient_epoch_reaches_tasks_started_inside() -> None:
    async def main() -> tuple[int | None, int | None]:
        async def seen() -> int | None:
            return ambient_epoch(KEY)

        with fenced_as(KEY, 5):
            inside = asyncio.create_task(seen())
        outside = asyncio.create_task(seen())
        return await inside, await outside

    assert asyncio.run(main()) == (5, None)


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ({"text": "t"}, "t"),
        ({"content": [{"type": "text", "text": "a"}, " b"]}, "a b"),
        ([{"type": "tool_use", "name": "x", "text": "hidden"}], ""),
        ({"tool_calls": [{"id": "c"}]}, ""),
        (42, ""),
        (None, ""),
    ],
)
def test_message_text(content: object, text: str) -> None:
    assert message_text(content) == text


def _stored(role: str, content: object) -> StoredMessage:
    from datetime import UTC, datetime

    return StoredMessage("m", role, content, {}, False, 0, datetime.now(UTC))  # type: ignore[arg-type]


def test_is_turn() -> None:
    assert is_turn(_stored("user", "hi"))
    assert not is_turn(_stored("user", " \n"))
    assert not is_turn(_stored("assistant", {"tool_calls": []}))
    assert not is_turn(_stored("tool", "output"))


def test_turn_refuses_bad_arguments_before_claiming(tmp_path: object) -> None:
    async def main() -> None:
        async with open_stores(f"memory://handle-{id(tmp_path)}") as stores:
            conv = stores.conversation(KEY, "u")
            with pytest.raises(UsageError):
                conv.turn("bad\x00id")
            with pytest.raises(UsageError):
                conv.turn("a1", stream_every=-1)
            with pytest.raises(UsageError):
                conv.turn("a1", user="not a message")  # type: ignore[arg-type]
            with pytest.raises(UsageError):
                _ = conv.turn("a1").epoch  # not entered
            async with conv.turn("a1") as turn:
                await turn.stream("abc")
                with pytest.raises(UsageError):
                    await turn.stream("xyz")  # not cumulative
                with pytest.raises(UsageError):
                    await turn.checkpoint(["not", "a", "mapping"])  # type: ignore[arg-type]
                with pytest.raises(UsageError):
                    await turn.checkpoint({"bad": object()})
            with pytest.raises(UsageError):
                stores.conversation("acme/s-1", "u")  # type: ignore[arg-type]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the in-memory warning, printed once per process
        asyncio.run(main())
