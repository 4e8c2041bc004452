"""The conversation store on files at its edges: refusals that name what they refuse,
writes that serialise on the key lock, what an absent key, a lapsed tombstone or a
crashed write leaves on disk, and listings that survive stray and stale entries."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentstores.errors import (
    ConflictError,
    ErasedError,
    FencedError,
    NotFoundError,
    NotOwnedError,
    StaleWriteError,
)
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.stores import Expired, IdleFor, OverCap, kit
from agentstores_file.fsio import FileIO, IOStats
from agentstores_file.header import key_check
from agentstores_file.stores import FileStores

from .conftest import ManualClock

P = "p"
WAIT = 10.0
"""Longest a gated step is held, and longest a test waits for a step to be reached."""
LET_IN = 1.5
"""How long a second writer is given to finish while the first holds the key: it can
finish only if the first's lock let it in."""
TTL = timedelta(seconds=10)


class _Crash(BaseException):
    """Stops a call at a chosen step, as a killed process would: no handler runs."""


class _CrashAt(FileIO):
    """Raises :class:`_Crash` at the first step of kind ``what`` on ``path``."""

    def __init__(self, what: str = "", path: str = "") -> None:
        super().__init__(fsync=False)
        self.what, self.path = what, path

    def step(self, what: str, path: str) -> None:
        if self.path and what == self.what and path == self.path:
            self.path = ""
            raise _Crash(f"{what} {path}")


class _Gate:
    def __init__(self, what: str, path: str) -> None:
        self.what, self.path = what, path
        self.used = False
        self.reached = threading.Event()
        self.go = threading.Event()


class _Gated(FileIO):
    """Holds the first call that reaches a gate's step (its kind, a path under the gate's)
    until the test opens the gate (or :data:`WAIT` passed)."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.gates: list[_Gate] = []
        self._guard = threading.Lock()

    def gate(self, what: str, path: str) -> _Gate:
        gate = _Gate(what, path)
        with self._guard:
            self.gates.append(gate)
        return gate

    def step(self, what: str, path: str) -> None:
        with self._guard:
            gate = next(
                (
                    g
                    for g in self.gates
                    if not g.used and g.what == what and path.startswith(g.path)
                ),
                None,
            )
            if gate is not None:
                gate.used = True
        if gate is not None:
            gate.reached.set()
            gate.go.wait(WAIT)


class _SortedListing(FileIO):
    """Lists every folder in name order (a filesystem may list in any order)."""

    def __init__(self) -> None:
        super().__init__(fsync=False)

    def listdir(self, path: str) -> list[str]:
        return sorted(super().listdir(path))


async def _reached(gate: _Gate) -> None:
    assert await asyncio.to_thread(gate.reached.wait, WAIT), f"no call reached {gate.what}"


async def _exists(path: str) -> bool:
    return await asyncio.to_thread(os.path.exists, path)


async def _read(folder: str, name: str) -> bytes:
    return await asyncio.to_thread(Path(folder, name).read_bytes)


async def _write(path: str, data: bytes) -> None:
    await asyncio.to_thread(Path(path).write_bytes, data)


def _msgs(prefix: str, n: int) -> list[Message]:
    return [Message(f"{prefix}{i}", ("user", "assistant")[i % 2], {"i": i}) for i in range(n)]


def _digest(stores: FileStores, key: ConversationKey) -> str:
    return os.path.basename(stores.root.key_dir(key))


def _keys_sorting(stores: FileStores, others: list[ConversationKey], *, before: bool) -> str:
    """A session id whose key folder sorts before (or after) every one of ``others``."""
    dirs = [stores.root.key_dir(k) for k in others]
    for i in range(10_000):
        d = stores.root.key_dir(ConversationKey("t", f"new{i}"))
        if (before and d < min(dirs)) or (not before and d > max(dirs)):
            return f"new{i}"
    raise AssertionError("no such session id")


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run in ``tmp_path`` (holding only the store): nothing else is ever in reach."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path


# --- refusals name what they refuse ---------------------------------------------------


async def test_write_refusals_name_their_key(stores: FileStores) -> None:
    """A refused title, last-turn status or conditional truncate carries the key it
    refused (``error.key``), whichever rule refused it."""
    c = stores.conversations
    key = ConversationKey("t", "s")
    await c.append_messages(key, P, _msgs("m", 2), epoch=5)
    with pytest.raises(NotOwnedError) as owned:
        await c.set_title(key, "intruder", "mine now")
    assert owned.value.key == key
    with pytest.raises(FencedError) as fenced:
        await c.set_metadata(key, P, {"a": 1}, epoch=4)
    assert fenced.value.key == key
    with pytest.raises(NotOwnedError) as status:
        await c.set_last_turn_status(key, "intruder", "complete")
    assert status.value.key == key
    with pytest.raises(FencedError) as status_fenced:
        await c.set_last_turn_status(key, P, "complete", epoch=4)
    assert status_fenced.value.key == key
    with pytest.raises(StaleWriteError) as stale:
        await c.truncate(key, P, "m0", expected_tail="m0")
    assert stale.value.key == key
    assert (stale.value.tail, stale.value.expected) == ("m1", "m0")
    assert len(await c.read_messages(key, P)) == 2, "a refused truncate removed something"


async def test_a_missing_message_is_named_in_the_refusal(stores: FileStores) -> None:
    """Truncating or branching at a message the transcript does not hold raises
    ``NotFoundError`` naming the source key and the message id (not "no such
    conversation": the conversation is there)."""
    c = stores.conversations
    key = ConversationKey("t", "s")
    await c.append_messages(key, P, _msgs("m", 2))
    with pytest.raises(NotFoundError) as cut:
        await c.truncate(key, P, "ghost")
    assert cut.value.key == key
    assert "'ghost'" in str(cut.value)
    with pytest.raises(NotFoundError) as branched:
        await c.branch(key, P, "ghost", new_session_id="b")
    assert branched.value.key == key
    assert "'ghost'" in str(branched.value)
    assert await c.get_conversation(ConversationKey("t", "b"), P) is None


# --- an absent key stays absent ----------------------------------------------------------


async def test_writes_to_an_absent_key_leave_no_key_folder(stores: FileStores) -> None:
    """Title, metadata, sharing and truncate refuse an absent key, and a last-turn
    status, a delete or a sweep of it does nothing: none of them makes its folder."""
    c = stores.conversations
    key = ConversationKey("t", "never")
    for refused in (
        c.set_title(key, P, "x"),
        c.set_metadata(key, P, {"a": 1}),
        c.share(key, P, "friend"),
        c.unshare(key, P, "friend"),
        c.truncate(key, P, "m0"),
    ):
        with pytest.raises(NotFoundError):
            await refused
    await c.set_last_turn_status(key, P, "complete")
    assert not await c.delete(key, P)
    assert not await c.erase_if(key, Expired())
    assert not await c.erase_if(key, OverCap(0))
    assert not await _exists(stores.root.key_dir(key)), "a no-op made the key's folder"
    assert stores.root.io.listdir(stores.root.keys_root) == [], "a no-op made a shard folder"


async def test_reads_of_an_absent_key_leave_no_key_folder(stores: FileStores) -> None:
    """Reading a conversation that does not exist finds nothing and makes nothing: no
    key folder, no lock file (reads must not fill the disk with empty keys)."""
    c = stores.conversations
    key = ConversationKey("t", "never")
    assert await c.read_messages(key, P) == []
    assert await c.get_transcript(key, P) == []
    assert await c.recent(key, P, 4) == []
    assert await c.tail(key, P, 4) is None
    assert await c.get_conversation(key, P) is None
    assert not await _exists(stores.root.key_dir(key)), "a read made the key's folder"


async def test_reads_share_the_key_lock(stores: FileStores) -> None:
    """Reads take the key's lock shared: a read goes through while another reader (here
    another open of the lock file, as another process would hold it) holds it."""
    c = stores.conversations
    key = ConversationKey("t", "read")
    await c.append_messages(key, P, _msgs("m", 2))
    lock = await asyncio.to_thread(
        os.open, stores.root.lock_path(stores.root.key_dir(key)), os.O_RDWR
    )
    try:
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_SH)
        reads = asyncio.gather(c.read_messages(key, P), c.get_transcript(key, P), c.tail(key, P, 1))
        done, _ = await asyncio.wait([reads], timeout=WAIT)
        assert done, "a read waited for another reader's shared lock"
    finally:
        await asyncio.to_thread(os.close, lock)  # closing releases it
    await reads


async def test_sharing_that_changes_nothing_writes_nothing(store_url: str) -> None:
    """Sharing with a principal already shared with, or unsharing one never shared
    with, replaces no file (watchers see no change)."""
    stats = IOStats()
    async with FileStores(store_url, fsync=False, io_stats=stats) as stores:
        c = stores.conversations
        key = ConversationKey("t", "s")
        await c.append_messages(key, P, _msgs("m", 1))
        await c.share(key, P, "friend")
        stats.reset()
        await c.share(key, P, "friend")
        await c.unshare(key, P, "stranger")
        assert (stats.replaces, stats.writes) == (0, 0), "a no-op share rewrote the header"
        await c.unshare(key, P, "friend")
        assert stats.replaces == 1
        info = await c.get_conversation(key, P)
        assert info is not None and info.shared_with == frozenset()


# --- writes of one key wait for each other -------------------------------------------------


async def test_two_deletes_of_one_conversation_erase_it_once(tmp_path: Path) -> None:
    """The second delete waits for the first (the key's lock is exclusive), then finds
    the tombstone: exactly one reports that it erased the conversation."""
    io = _Gated()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        c = stores.conversations
        key = ConversationKey("t", "s")
        await c.append_messages(key, P, _msgs("m", 2))
        gate = io.gate("create_tmp", stores.root.key_dir(key))  # the tombstone, being written
        first = asyncio.ensure_future(c.delete(key, P))
        await _reached(gate)
        second = asyncio.ensure_future(c.delete(key, P))
        await asyncio.wait({second}, timeout=LET_IN)
        gate.go.set()
        assert sorted([await first, await second]) == [False, True]


async def test_two_last_turn_statuses_apply_in_turn(tmp_path: Path) -> None:
    """``set_last_turn_status`` holds the key exclusively from the header it reads to the
    one it writes: a second status at a higher epoch waits, so the later write wins and
    the fence ends at the higher epoch."""
    io = _Gated()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        c = stores.conversations
        key = ConversationKey("t", "s")
        await c.append_messages(key, P, _msgs("m", 1), epoch=1)
        gate = io.gate("create_tmp", stores.root.key_dir(key))
        first = asyncio.ensure_future(c.set_last_turn_status(key, P, "running", epoch=5))
        await _reached(gate)
        second = asyncio.ensure_future(c.set_last_turn_status(key, P, "complete", epoch=7))
        await asyncio.wait({second}, timeout=LET_IN)
        gate.go.set()
        await first
        await second
        info = await c.get_conversation(key, P)
        assert info is not None and info.last_turn_status == "complete", "an older write won"
        assert (await stores.supervision.read(key, P)).fence == 7, "the lower fence won"


@pytest.mark.parametrize("new_key_folder", ["sorts first", "made by the branch"])
async def test_two_branches_into_one_new_key_make_it_once(
    tmp_path: Path, new_key_folder: str
) -> None:
    """Two branches (of two sources) into the same new key: the new key's lock is held
    exclusively from its header check to its commit, so exactly one makes it and the
    other is refused with ``ConflictError``; the branch holds the winner's copy. The new
    key's folder either sorts before the sources' (it is locked with them, in the first
    pass) or after (it is made and locked once the sources are read)."""
    io = _Gated()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        c = stores.conversations
        one, two = ConversationKey("t", "one"), ConversationKey("t", "two")
        await c.append_messages(one, P, [Message("a0", "user", "from one")])
        await c.append_messages(two, P, [Message("b0", "user", "from two")])
        first_pass = new_key_folder == "sorts first"
        new = _keys_sorting(stores, [one, two], before=first_pass)
        ndir = stores.root.key_dir(ConversationKey("t", new))
        late = None if first_pass else io.gate("mkdir", ndir)  # the second, before it makes it
        entry = io.gate("create", stores.root.owners_root)  # the first, owning the new key
        second = None
        if late is not None:
            second = asyncio.ensure_future(c.branch(two, P, "b0", new_session_id=new))
            await _reached(late)
        first = asyncio.ensure_future(c.branch(one, P, "a0", new_session_id=new))
        await _reached(entry)
        if late is not None:
            late.go.set()
        else:
            second = asyncio.ensure_future(c.branch(two, P, "b0", new_session_id=new))
        assert second is not None
        await asyncio.wait({second}, timeout=LET_IN)
        entry.go.set()
        outcomes = await asyncio.gather(first, second, return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, ConflictError)]
        made = [o for o in outcomes if isinstance(o, ConversationKey)]
        assert (len(made), len(refused)) == (1, 1), f"two branches made one key: {outcomes}"
        (row,) = await c.read_messages(made[0], P)
        assert row.content == "from one"


# --- what lapsed tombstones and crashes leave behind ----------------------------------------


async def test_a_branch_into_a_lapsed_key_inherits_nothing_of_its_old_life(
    in_tmp: Path,
) -> None:
    """An erase stopped after its tombstone (the state file left behind), the tombstone
    lapsed, then another principal branches into the key: the branch is theirs alone,
    with none of the old owner's agent state."""
    url = f"file://{in_tmp / 'store'}"
    clock = ManualClock()
    old, source = ConversationKey("t", "old"), ConversationKey("t", "source")
    async with FileStores(url, clock=clock, tombstone_ttl=TTL) as setup:
        await setup.conversations.append_messages(old, "alice", _msgs("o", 2))
        await setup.state.save(old, "alice", {"secret": "alice's"})
        await setup.conversations.append_messages(source, "bob", _msgs("s", 3))
        crash_path = os.path.join(setup.root.key_dir(old), "state")
    io = _CrashAt("unlink", crash_path)
    async with FileStores(url, clock=clock, tombstone_ttl=TTL, io=io) as crashing:
        with pytest.raises(_Crash):
            await crashing.conversations.delete(old, "alice")
    assert await _exists(crash_path), "the crash came too late to leave the state behind"
    clock.advance(TTL.total_seconds() + 1)
    async with FileStores(url, clock=clock, tombstone_ttl=TTL, fsync=False) as stores:
        c = stores.conversations
        assert await c.branch(source, "bob", "s1", new_session_id="old") == old
        assert await stores.state.load(old, "bob") == {}, "the old owner's state came back"
        assert [m.content for m in await c.read_messages(old, "bob")] == [{"i": 0}, {"i": 1}]
        info = await c.get_conversation(old, "bob")
        assert info is not None and info.owner == "bob"
        assert await c.get_conversation(old, "alice") is None


async def test_a_branch_over_a_crashed_branch_keeps_none_of_its_data(in_tmp: Path) -> None:
    """A branch stopped before its header (its transcript files written) leaves them in
    the new key's folder; the next branch into that key starts from fresh files, so no
    byte of the crashed copy stays on disk."""
    url = f"file://{in_tmp / 'store'}"
    source, new = ConversationKey("t", "source"), ConversationKey("t", "new")
    async with FileStores(url, fsync=False) as setup:
        await setup.conversations.append_messages(
            source, P, [Message("m0", "user", "hi"), Message("m1", "assistant", "SECRET" * 50)]
        )
        ndir = setup.root.key_dir(new)
    async with FileStores(url, io=_CrashAt("replace", os.path.join(ndir, "head"))) as crashing:
        with pytest.raises(_Crash):
            await crashing.conversations.branch(source, P, "m1", new_session_id="new")
    assert b"SECRET" in await _read(ndir, "msgs.dat"), "the crash left no copy"
    async with FileStores(url, fsync=False) as stores:
        c = stores.conversations
        await c.branch(source, P, "m0", new_session_id="new")
        assert [m.content for m in await c.read_messages(new, P)] == ["hi"]
        for name in await asyncio.to_thread(os.listdir, ndir):
            assert b"SECRET" not in await _read(ndir, name), f"{name} keeps the crashed copy"


async def test_a_branch_of_a_header_without_metadata(stores: FileStores) -> None:
    """A conversation whose header has no ``md`` (an older version wrote it) has no
    metadata, and a branch of it starts with none."""
    c = stores.conversations
    key = ConversationKey("t", "old-format")
    await c.append_messages(key, P, _msgs("m", 2), title="old")
    kdir = stores.root.key_dir(key)
    head = json.loads(await _read(kdir, "head"))
    del head["conv"]["md"]
    await _write(os.path.join(kdir, "head"), json.dumps(head).encode())
    new = await c.branch(key, P, "m1", new_session_id="b")
    info = await c.get_conversation(new, P)
    assert info is not None and (info.title, info.metadata) == ("old", {})
    assert len(await c.read_messages(new, P)) == 2


async def test_a_long_branch_leaves_one_id_table(stores: FileStores) -> None:
    """A branch copying more messages than its first id table holds (more than 1024, in
    chunks) completes, and the table it outgrew does not stay on disk."""
    c = stores.conversations
    key = ConversationKey("t", "long")
    await c.append_messages(key, P, _msgs("a", 600))
    await c.append_messages(key, P, [Message(f"b{i}", "user", i) for i in range(500)])
    new = await c.branch(key, P, "b499", new_session_id="copy")
    assert len(await c.read_messages(new, P)) == 1100
    tables = [n for n in os.listdir(stores.root.key_dir(new)) if n.startswith("ids-")]
    assert len(tables) == 1, f"id tables left: {tables}"


async def test_an_erase_whose_owner_folder_went_meanwhile_succeeds(tmp_path: Path) -> None:
    """Erasing an owner's last conversation while another erasure removes their (then
    empty) listing folder: the erase succeeds and nothing of the owner is left."""

    class _FolderGoes(FileIO):
        def __init__(self) -> None:
            super().__init__(fsync=True)  # the folder's sync is the step that meets it gone
            self.owners = ""

        def step(self, what: str, path: str) -> None:
            if what == "rmdir" and path == self.owners:
                self.owners = ""
                os.rmdir(path)

    io = _FolderGoes()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        c = stores.conversations
        key = ConversationKey("t", "s")
        await c.append_messages(key, P, _msgs("m", 1))
        io.owners = stores.root.owner_dir("t", P)
        assert await c.delete(key, P)
        assert io.owners == "", "the erase did not try to remove the folder"
        assert not await _exists(stores.root.owner_dir("t", P))
        assert (await c.list_conversations("t", P)).items == []


# --- listings ----------------------------------------------------------------------------


async def test_a_stray_file_in_an_owners_folder_hides_nothing(tmp_path: Path) -> None:
    """A file that is no listing entry (``.DS_Store``), listed before the entries, is
    skipped: every conversation of the owner is still listed and counted."""
    async with FileStores(f"file://{tmp_path / 'store'}", io=_SortedListing()) as stores:
        c = stores.conversations
        keys = [ConversationKey("t", f"k{i}") for i in range(3)]
        for key in keys:
            await c.append_messages(key, P, _msgs("m", 1))
        await _write(os.path.join(stores.root.owner_dir("t", P), ".DS_Store"), b"")
        page = await c.list_conversations("t", P)
        assert {i.key for i in page.items} == set(keys)
        assert await c.erase_if(keys[0], OverCap(1))  # two newer ones, counted past it


async def test_entries_a_crashed_erase_left_hide_nothing(tmp_path: Path) -> None:
    """An erase stopped before its listing entry went leaves an entry whose header is a
    tombstone; listed first, it is skipped and every live conversation is still listed."""
    url = f"file://{tmp_path / 'store'}"
    async with FileStores(url, fsync=False) as setup:
        keys = [ConversationKey("t", f"k{i}") for i in range(4)]
        for key in keys:
            await setup.conversations.append_messages(key, P, _msgs("m", 1))
        gone = min(keys, key=lambda k: _digest(setup, k))
        entry = os.path.join(setup.root.owner_dir("t", P), _digest(setup, gone))
    async with FileStores(url, io=_CrashAt("unlink", entry)) as crashing:
        with pytest.raises(_Crash):
            await crashing.conversations.delete(gone, P)
    assert await _exists(entry)
    async with FileStores(url, io=_SortedListing()) as stores:
        page = await stores.conversations.list_conversations("t", P)
        assert {i.key for i in page.items} == set(keys) - {gone}


async def test_a_stale_entry_does_not_list_the_keys_next_owner(tmp_path: Path) -> None:
    """Alice's erase stopped before her listing entry went; once the tombstone lapsed,
    Bob took the key. Alice's stale entry names a live key, but it is Bob's: she does
    not see it listed, he does."""
    url = f"file://{tmp_path / 'store'}"
    clock = ManualClock()
    key = ConversationKey("t", "s")
    async with FileStores(url, clock=clock, tombstone_ttl=TTL, fsync=False) as setup:
        await setup.conversations.append_messages(key, "alice", _msgs("a", 1))
        entry = os.path.join(setup.root.owner_dir("t", "alice"), _digest(setup, key))
    io = _CrashAt("unlink", entry)
    async with FileStores(url, clock=clock, tombstone_ttl=TTL, io=io) as crashing:
        with pytest.raises(_Crash):
            await crashing.conversations.delete(key, "alice")
    clock.advance(TTL.total_seconds() + 1)
    async with FileStores(url, clock=clock, tombstone_ttl=TTL, fsync=False) as stores:
        c = stores.conversations
        await c.append_messages(key, "bob", _msgs("b", 1))
        assert await _exists(entry), "the stale entry is gone: nothing is tested"
        assert (await c.list_conversations("t", "alice")).items == [], "alice sees bob's"
        assert [i.key for i in (await c.list_conversations("t", "bob")).items] == [key]


# --- the clock, to the microsecond -------------------------------------------------------


FAR = datetime(9000, 1, 1, tzinfo=UTC)
"""A store clock where microseconds since 1970 are past 2**53 (a float loses them)."""


async def test_idle_is_exact_to_the_microsecond_at_any_date(store_url: str) -> None:
    """``IdleFor(d)`` matches a conversation last updated more than ``d`` ago: not at
    exactly ``d``, and at ``d`` plus one microsecond, even where a float cannot count
    microseconds."""
    clock = ManualClock()
    clock.now = FAR
    day = timedelta(days=1)
    async with FileStores(store_url, clock=clock, fsync=False) as stores:
        c = stores.conversations
        key = ConversationKey("t", "s")
        await c.append_messages(key, P, _msgs("m", 1))
        clock.now = FAR + day
        assert await c.find_sweepable(IdleFor(day)) == []
        assert not await c.erase_if(key, IdleFor(day))
        clock.now = FAR + day + timedelta(microseconds=1)
        assert await c.find_sweepable(IdleFor(day)) == [key]
        assert await c.erase_if(key, IdleFor(day))


async def test_a_tombstone_records_its_lapse_and_fence_exactly(store_url: str) -> None:
    """The tombstone is the documented header (key check, lapse time in whole
    microseconds, the key's fence), and the ``ErasedError`` of a write after it says
    when it lapses to the microsecond, even where a float cannot count them."""
    clock = ManualClock()
    clock.now = FAR + timedelta(microseconds=1)
    async with FileStores(store_url, clock=clock, tombstone_ttl=TTL, fsync=False) as stores:
        c = stores.conversations
        key = ConversationKey("t", "s")
        await c.append_messages(key, P, _msgs("m", 1), epoch=7)
        erased_at = clock.now
        assert await c.delete(key, P)
        raw = json.loads(await _read(stores.root.key_dir(key), "head"))
        until = kit.to_micros(erased_at + TTL)
        assert raw == {"kc": key_check(key), "erased_until": until, "fence": 7}
        assert type(raw["erased_until"]) is int
        with pytest.raises(ErasedError) as erased:
            await c.set_title(key, P, "x")
        assert erased.value.key == key
        assert erased.value.context["until"] == erased_at + TTL
