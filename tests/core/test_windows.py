"""agentstores.windows: a store's recent turns kept only when they are the rows up to the
tail the metadata names, read together."""

from __future__ import annotations

from datetime import UTC, datetime

from agentstores import ConversationKey, Message, open_stores
from agentstores.models import ConversationInfo, StoredMessage
from agentstores.windows import answers_recent, tail_window

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _row(seq: int, role: str = "user") -> StoredMessage:
    return StoredMessage(f"m{seq}", role, {}, {}, False, seq, AT)  # type: ignore[arg-type]


def _info(count: int, tail: str | None) -> ConversationInfo:
    return ConversationInfo(
        key=ConversationKey("t", "s"),
        owner="u",
        title=None,
        created_at=AT,
        updated_at=AT,
        expires_at=None,
        last_turn_status=None,
        tail_message_id=tail,
        message_count=count,
        metadata={},
        shared_with=frozenset(),
    )


def test_the_turns_up_to_the_tail_are_the_window() -> None:
    turns = [_row(n) for n in range(6)]
    assert tail_window(turns, _info(6, "m5"), 3) == turns[3:]
    assert tail_window(turns, _info(6, "m5"), 6) == []


def test_turns_that_are_not_the_rows_up_to_the_tail_are_refused() -> None:
    turns = [_row(0), _row(1), _row(3)]  # a row of another role sits at position 2
    assert tail_window(turns, _info(4, "m3"), 1) is None
    assert tail_window([_row(0), _row(1)], _info(3, "m2"), 0) is None  # too few
    assert tail_window([_row(0), _row(1)], _info(2, "other"), 0) is None  # another tail
    assert tail_window([_row(0), _row(1)], _info(3, "m1"), 1) is None  # the tail moved on


async def test_a_store_answers_recent_and_a_wrapper_is_not_trusted_to() -> None:
    async with open_stores("memory://windows") as stores:
        assert answers_recent(stores.conversations)
        await stores.conversations.append_messages(
            ConversationKey("t", "s"), "u", [Message.user("hi")]
        )

    class Wrapper:
        pass

    assert not answers_recent(Wrapper())  # type: ignore[arg-type]
