"""Conversations written by the previous transcript layout (every record in one hash by
seq, the speakers' sets holding seqs) read and write exactly as the same messages
written by this version, whichever call touches them first; the first touch converts
them once, keeping a temporary conversation's expiry."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agentstores import ConversationKey, Message
from agentstores.stores import ConversationStore
from agentstores_redis import conversations
from agentstores_redis.client import Script
from agentstores_redis.stores import RedisStores

PREVIOUS_APPEND = Script(
    "conv_append_previous",
    (Path(__file__).parent / "previous_layout_append.lua").read_text("utf-8"),
    write=True,
)
"""The append script of the previous layout: through today's call it writes that layout."""

MESSAGES = [
    Message("s0", "system", "be brief"),
    Message("u0", "user", {"text": "hello"}, {"lang": "en"}),
    Message("a0", "assistant", "hi"),
    Message("t0", "tool", {"result": [1, 2]}, {"tool_call_id": "c1"}),
    Message("u1", "user", "and|then"),
    Message("a1", "assistant", "summary so far", compaction=True),
    Message("o0", "other", None),
    Message("u2", "user", "last question"),
    Message("a2", "assistant", {"answer": "é"}),
]
OWNER = "owner"


@contextlib.contextmanager
def previous_layout() -> Iterator[None]:
    """Appends made inside write the previous layout."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conversations, "CONV_APPEND", PREVIOUS_APPEND)
        yield


async def _views(conv: ConversationStore, key: ConversationKey) -> dict[str, Any]:
    """Everything a reader can see of ``key``, but the timestamps (the twin was written at
    another time)."""

    def rows(ms: list[Any]) -> list[tuple[Any, ...]]:
        return [(m.seq, m.id, m.role, m.content, dict(m.metadata), m.compaction) for m in ms]

    def turns(ts: list[Any]) -> list[tuple[Any, ...]]:
        return [(t.index, t.id, t.role, t.content) for t in ts]

    out: dict[str, Any] = {}
    for k in (1, 2, 3, 5, 100):
        out[f"recent {k}"] = rows(await conv.recent(key, OWNER, k))
    out["history"] = rows(await conv.history(key, OWNER))
    everything = await conv.read_messages(key, OWNER)
    out["read_messages"] = rows(everything)
    out["read_messages 2+3"] = rows(await conv.read_messages(key, OWNER, start=2, limit=3))
    for speaker in ("all", "user", "assistant"):
        for i in (0, 1, -1, -2, 50, -50):
            found = await conv.get_transcript(key, OWNER, index=i, speaker=speaker)  # type: ignore[arg-type]
            out[f"{speaker} at {i}"] = turns(found)
        out[f"{speaker}"] = turns(await conv.get_transcript(key, OWNER, speaker=speaker))  # type: ignore[arg-type]
        out[f"{speaker} limit 2"] = turns(
            await conv.get_transcript(key, OWNER, speaker=speaker, limit=2)  # type: ignore[arg-type]
        )
        if everything:
            span = (everything[0].created_at, everything[-1].created_at)
            out[f"{speaker} in time"] = turns(
                await conv.get_transcript(key, OWNER, time_range=span, speaker=speaker, limit=4)  # type: ignore[arg-type]
            )
    info = await conv.get_conversation(key, OWNER)
    out["info"] = None if info is None else (info.message_count, info.tail_message_id, info.title)
    for k in (0, 1, 4, 100):
        tail = await conv.tail(key, OWNER, k)
        out[f"tail {k}"] = None if tail is None else rows(tail.messages)
    return out


async def _legacy_keys(s: RedisStores, key: ConversationKey) -> int:
    names = s.keys.conv(key)
    return int(await s.client.command(names.header, "EXISTS", names.legacy_records))


FirstTouch = Callable[[RedisStores, ConversationKey], Awaitable[Any]]

FIRST_TOUCHES: dict[str, FirstTouch] = {
    "recent": lambda s, k: s.conversations.recent(k, OWNER, 4),
    "first user message": lambda s, k: s.conversations.get_transcript(
        k, OWNER, index=0, speaker="user"
    ),
    "last assistant message": lambda s, k: s.conversations.get_transcript(
        k, OWNER, index=-1, speaker="assistant"
    ),
    "transcript": lambda s, k: s.conversations.get_transcript(k, OWNER),
    "read_messages": lambda s, k: s.conversations.read_messages(k, OWNER, start=1),
    "history": lambda s, k: s.conversations.history(k, OWNER),
    "branch": lambda s, k: s.conversations.branch(k, OWNER, "u1"),
    "info": lambda s, k: s.conversations.get_conversation(k, OWNER),
    "tail": lambda s, k: s.conversations.tail(k, OWNER, 3),
}


@pytest.mark.parametrize("touch", sorted(FIRST_TOUCHES))
async def test_reads_see_what_this_version_wrote(url: str, touch: str) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    old, twin = ConversationKey(tenant, "old"), ConversationKey(tenant, "twin")
    async with RedisStores(url) as s:
        with previous_layout():
            await s.conversations.append_messages(old, OWNER, MESSAGES[:4], title="t")
            await s.conversations.append_messages(old, OWNER, MESSAGES[4:])
        await s.conversations.append_messages(twin, OWNER, MESSAGES[:4], title="t")
        await s.conversations.append_messages(twin, OWNER, MESSAGES[4:])
        assert await _legacy_keys(s, old) == 1
        first = await FIRST_TOUCHES[touch](s, old)
        if touch == "branch":
            copied = await s.conversations.read_messages(first, OWNER)
            assert [(m.role, m.content) for m in copied] == [
                (m.role, m.content) for m in MESSAGES[:5]
            ]
        elif touch != "info":
            assert first == await FIRST_TOUCHES[touch](s, old), "a second read differs"
            assert await _legacy_keys(s, old) == 0, "the read did not convert"
        assert await _views(s.conversations, old) == await _views(s.conversations, twin)
        assert await _legacy_keys(s, old) == 0
        await s.purge()


async def test_writes_convert_then_apply(url: str) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    async with RedisStores(url) as s:
        conv = s.conversations
        keys = {}
        for name in ("appended", "truncated", "twin-appended", "twin-truncated"):
            keys[name] = key = ConversationKey(tenant, name)
            if name.startswith("twin"):
                await conv.append_messages(key, OWNER, MESSAGES)
            else:
                with previous_layout():
                    await conv.append_messages(key, OWNER, MESSAGES)
        for prefix in ("", "twin-"):
            appended, truncated = keys[prefix + "appended"], keys[prefix + "truncated"]
            extra = [Message("u3", "user", "more"), Message("t1", "tool", 1)]
            await conv.append_messages(appended, OWNER, extra)
            assert await conv.truncate(truncated, OWNER, "u1") == 5
            await conv.append_messages(truncated, OWNER, [Message("u1", "user", "again")])
            await conv.truncate(truncated, OWNER, "a0")
        for name in ("appended", "truncated"):
            assert await _legacy_keys(s, keys[name]) == 0
            assert await _views(conv, keys[name]) == await _views(conv, keys["twin-" + name])
        await s.purge()


@pytest.mark.parametrize("roles", [("user", "assistant"), ("user",), ("tool", "system")])
async def test_a_conversation_missing_a_speaker_converts(url: str, roles: tuple[str, ...]) -> None:
    """The conversion moves each speaker's records in batches: a speaker with none (no
    user message yet, or none but users) must not make it send an empty batch."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    messages = [Message(f"m{i}", roles[i % len(roles)], i) for i in range(5)]  # type: ignore[arg-type]
    extra = [Message("x", roles[0], "more")]  # type: ignore[arg-type]
    old, twin = ConversationKey(tenant, "old"), ConversationKey(tenant, "twin")
    async with RedisStores(url) as s:
        conv = s.conversations
        with previous_layout():
            await conv.append_messages(old, OWNER, messages)
        await conv.append_messages(twin, OWNER, messages)
        for key in (old, twin):
            await conv.append_messages(key, OWNER, extra)
        assert await _legacy_keys(s, old) == 0
        assert await _views(conv, old) == await _views(conv, twin)
        await s.purge()


@pytest.mark.parametrize(
    ("cut", "at", "removed"),
    [("before", "a1", 4), ("after", "u1", 4), ("by_role", "u2", 2), ("by_role", "t0", 5)],
)
async def test_truncate_converts_then_cuts_as_asked(
    url: str, cut: str, at: str, removed: int
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    old, twin = ConversationKey(tenant, "old"), ConversationKey(tenant, "twin")
    async with RedisStores(url) as s:
        conv = s.conversations
        with previous_layout():
            await conv.append_messages(old, OWNER, MESSAGES)
        await conv.append_messages(twin, OWNER, MESSAGES)
        for key in (old, twin):
            assert await conv.truncate(key, OWNER, at, cut=cut) == removed  # type: ignore[arg-type]
        assert await _legacy_keys(s, old) == 0
        assert await _views(conv, old) == await _views(conv, twin)
        await s.purge()


async def test_a_stranger_sees_nothing_and_converts_nothing_visible(url: str) -> None:
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "old")
    async with RedisStores(url) as s:
        with previous_layout():
            await s.conversations.append_messages(key, OWNER, MESSAGES)
        assert await s.conversations.recent(key, "stranger", 5) == []
        assert await s.conversations.get_transcript(key, "stranger", index=0, speaker="user") == []
        assert await s.conversations.read_messages(key, "stranger") == []
        assert await s.conversations.tail(key, "stranger", 5) is None
        assert await _legacy_keys(s, key) == 1
        assert [m.id for m in await s.conversations.recent(key, OWNER, 2)] == ["u2", "a2"]
        await s.purge()


async def test_a_temporary_conversation_keeps_its_expiry(url: str) -> None:
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "old")
    async with RedisStores(url) as s:
        names = s.keys.conv(key)
        expires = await s.now() + timedelta(hours=2)
        with previous_layout():
            await s.conversations.append_messages(key, OWNER, MESSAGES, expires_at=expires)
        deadline = await s.client.command(names.header, "PEXPIRETIME", names.legacy_records)
        assert deadline > 0
        await s.conversations.recent(key, OWNER, 3)
        assert await _legacy_keys(s, key) == 0
        for records in (names.user_records, names.assistant_records, names.other_records):
            assert await s.client.command(names.header, "PEXPIRETIME", records) == deadline
        await s.purge()


async def test_erasing_an_unconverted_conversation_leaves_only_its_tombstone(url: str) -> None:
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "old")
    async with RedisStores(url) as s:
        with previous_layout():
            await s.conversations.append_messages(key, OWNER, MESSAGES)
        assert await s.conversations.delete(key, OWNER)
        names = s.keys.conv(key)
        left = [k for k in names.all if await s.client.command(names.header, "EXISTS", k)]
        assert left == [names.header]
        assert await s.conversations.recent(key, OWNER, 5) == []
        await s.purge()


async def test_every_transcript_key_of_a_temporary_conversation_expires_with_it(
    url: str,
) -> None:
    """The server drops a temporary conversation by itself at its drop deadline: every
    record set included, whichever append created it."""
    key = ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "temp")
    async with RedisStores(url) as s:
        names = s.keys.conv(key)
        await s.conversations.append_messages(key, OWNER, MESSAGES[:2])
        expires = await s.now() + timedelta(hours=2)
        await s.conversations.append_messages(key, OWNER, MESSAGES[2:], expires_at=expires)
        drop_at = int(await s.client.command(names.header, "HGET", names.header, "drop_at"))
        deadline = -(-drop_at // 1000)
        for part in (
            names.meta,
            names.message_ids,
            names.by_time,
            names.user_records,
            names.assistant_records,
            names.other_records,
            names.compaction_seqs,
        ):
            assert await s.client.command(names.header, "PEXPIRETIME", part) == deadline, part
        await s.purge()
