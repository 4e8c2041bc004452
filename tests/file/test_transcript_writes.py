"""What an append leaves in a transcript, through the store's public calls.

Promises covered:

- ``created_at`` never goes back: an append is stamped no earlier than the previous
  append, even when the store clock steps back with no truncation in between (the
  stamp of the last append is kept in the header for that);
- a new transcript starts clean: the id table of an append that crashed before its
  commit is removed when the key's conversation is next started, even by a call that
  appends no message (no orphan ``ids-*.tbl`` stays beside the header);
- ids whose hashes collide stay apart even when the append meeting them finds its id
  table filled by crashed appends and rebuilds it: the rebuilt table keeps the older id
  live, the new id goes to a free slot, and both are found again.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_file import transcript
from agentstores_file.fsio import FileIO
from agentstores_file.stores import FileStores
from agentstores_file.transcript import TABLE_MIN

from .conftest import ManualClock
from .test_id_table import _free_slots, _tables


class _Crash(BaseException):
    """Stops a call like SIGKILL would: no handler of the backend runs."""


class _CrashBeforeCommit(FileIO):
    """While ``crash`` is set, stops a write just before it writes a key header."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.crash = False

    def step(self, what: str, path: str) -> None:
        if self.crash and what == "create_tmp" and path.endswith(os.sep + ".head.tmp"):
            raise _Crash(path)
        super().step(what, path)


async def test_created_at_never_goes_back_across_appends_when_the_clock_does(
    tmp_path: Path, clock: ManualClock
) -> None:
    """With no truncation in between, an append made after the store clock stepped back
    is stamped at the previous append's time, not before it."""
    async with FileStores(f"file://{tmp_path / 'store'}", clock=clock, fsync=False) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "clock")
        (a,) = await conv.append_messages(key, "u", [Message("a", "user", "a")])
        clock.advance(-60)
        (b,) = await conv.append_messages(key, "u", [Message("b", "user", "b")])
        clock.advance(-60)
        (c,) = await conv.append_messages(key, "u", [Message("c", "user", "c")])
        assert a.created_at <= b.created_at <= c.created_at, (a, b, c)
        stamps = [m.created_at for m in await conv.read_messages(key, "u")]
        assert stamps == [a.created_at] * 3


async def test_a_new_transcript_leaves_no_id_table_of_a_crashed_append(tmp_path: Path) -> None:
    """The first append to a key crashes just before its commit, leaving its id table on
    disk; starting the conversation again with no message (a title only) removes it, so
    the key holds no id table its header does not name."""
    io = _CrashBeforeCommit()
    url = f"file://{tmp_path / 'store'}"
    key = ConversationKey("t", "orphan")
    io.crash = True
    async with FileStores(url, io=io) as stores:
        kdir = stores.root.key_dir(key)
        with pytest.raises(_Crash):
            await stores.conversations.append_messages(key, "u", [Message("m", "user", "m")])
    assert len(await asyncio.to_thread(_tables, kdir)) == 1  # the crash's leftover
    io.crash = False
    async with FileStores(url, io=io) as stores:
        conv = stores.conversations
        assert await conv.append_messages(key, "u", [], title="fresh") == []
        info = await conv.get_conversation(key, "u")
        assert info is not None and info.title == "fresh"
        assert await conv.read_messages(key, "u") == []
        assert await asyncio.to_thread(_tables, kdir) == []


async def test_colliding_ids_stay_apart_when_a_full_table_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "a" and "x" share one hash. Crashed appends fill the id table; appending "x" then
    finds no free slot and rebuilds the table, where "a"'s slot lies on "x"'s probe path
    and is live: "x" gets a slot of its own, and both ids are found again (re-appends
    are no-ops)."""
    real = transcript.id_hash
    shared = 0x1234
    monkeypatch.setattr(
        transcript, "id_hash", lambda mid: shared if mid in ("a", "x") else real(mid)
    )
    io = _CrashBeforeCommit()
    url = f"file://{tmp_path / 'store'}"
    key = ConversationKey("t", "collide-rebuild")
    size = TABLE_MIN // 2 - 1  # the most one append takes without a rebuild, after "a"
    async with FileStores(url, io=io) as stores:
        kdir = stores.root.key_dir(key)
        await stores.conversations.append_messages(key, "u", [Message("a", "user", "a")])
    io.crash = True
    for k in range(3):
        batch = [Message(f"c{k}-{i}", "user", i) for i in range(size)]
        async with FileStores(url, io=io) as stores:
            with pytest.raises(_Crash):
                await stores.conversations.append_messages(key, "u", batch)
    io.crash = False
    assert 0 in await asyncio.to_thread(_free_slots, kdir)  # the committed table is full
    async with FileStores(url, io=io) as stores:
        conv = stores.conversations
        (x,) = await conv.append_messages(key, "u", [Message("x", "user", "x")])
        assert x.seq == 1
        for i in ("a", "x"):
            assert await conv.append_messages(key, "u", [Message(i, "user", i)]) == []
        assert [m.id for m in await conv.read_messages(key, "u")] == ["a", "x"]
    assert await asyncio.to_thread(_free_slots, kdir) == [2 * TABLE_MIN - 2]
