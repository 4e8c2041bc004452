"""Reading messages builds each :class:`StoredMessage` by setting its slots directly (the
hot path of every read); the result must be the very message the dataclass's own
constructor makes, field for field. recent() merges the two speakers' slices here."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from agentstores.models import StoredMessage
from agentstores.stores.kit import UNIX_EPOCH
from agentstores_redis.conversations import _last_merged, _stored_many


def _record(created_us: int, mid: str, body: bytes) -> bytes:
    raw = mid.encode()
    return b"%d|%d|%b%b" % (created_us, len(raw), raw, body)


def test_decoded_messages_equal_constructed_ones() -> None:
    reply = [
        b"7",
        _record(1_700_000_000_000_001, "a|b|é", b'["user",{"text":"hi"},{"k":[1,2]},false]'),
        b"9",
        _record(1_700_000_000_000_002, "m9", b'["assistant","done",{},true]'),
    ]
    decoded = _stored_many(reply[0::2], reply[1::2])
    expected = [
        StoredMessage(
            "a|b|é",
            "user",
            {"text": "hi"},
            {"k": [1, 2]},
            False,
            7,
            UNIX_EPOCH + timedelta(microseconds=1_700_000_000_000_001),
        ),
        StoredMessage(
            "m9",
            "assistant",
            "done",
            {},
            True,
            9,
            UNIX_EPOCH + timedelta(microseconds=1_700_000_000_000_002),
        ),
    ]
    assert decoded == expected
    for got, want in zip(decoded, expected, strict=True):
        assert dataclasses.asdict(got) == dataclasses.asdict(want)
        assert repr(got) == repr(want)
        assert type(got.seq) is int
    try:
        decoded[0].seq = 8  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a decoded message must stay frozen")


def test_an_empty_reply_decodes_to_no_messages() -> None:
    assert _stored_many([], []) == []


@given(st.lists(st.booleans(), max_size=30), st.integers(min_value=1, max_value=40))
def test_recent_merges_the_last_of_both_speakers(speakers: list[bool], limit: int) -> None:
    """recent()'s merge of the two speakers' last ``limit`` (``ZRANGE -limit -1
    WITHSCORES`` replies) is the last ``limit`` of all of them, in seq order."""
    users = [seq for seq, is_user in enumerate(speakers) if is_user][-limit:]
    assistants = [seq for seq, is_user in enumerate(speakers) if not is_user][-limit:]

    def reply(seqs: list[int]) -> list[bytes]:
        return [x for s in seqs for x in (b"record %d" % s, b"%d" % s)]

    seqs, records = _last_merged(reply(users), reply(assistants), limit)
    expected = sorted(users + assistants)[-limit:]
    assert [int(s) for s in seqs] == expected
    assert list(records) == [b"record %d" % s for s in expected]
