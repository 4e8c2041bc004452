"""What is particular to files: URLs, the on-disk names, collisions, errors at the edge."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import struct
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentstores.api import DEFAULT_URL, open_stores
from agentstores.errors import (
    BackendUnavailableError,
    ConflictError,
    ErasedError,
    NotFoundError,
    NotOwnedError,
    StaleWriteError,
    UnknownOutcomeError,
    UsageError,
)
from agentstores.keys import ConversationKey
from agentstores.models import (
    ClientInfo,
    Message,
    PendingAuthorization,
    RecordedEvent,
    SupervisionRow,
    UserIntegration,
)
from agentstores.plugins import get_registry
from agentstores.stores import OverCap
from agentstores_file.fsio import FileIO
from agentstores_file.plugin import agentstores_backends
from agentstores_file.stores import FileStores, path_from_url
from agentstores_file.transcript import DATA, IDX, INDEX, ROLES, id_hash

from .conftest import ManualClock

NASTY = ["../..", "/etc/passwd", "a/b", "..", ".", "{x}", "c:d", "%2F", "é漢🙂", "x" * 256]


def test_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert path_from_url("file:///var/lib/agents") == "/var/lib/agents"
    assert path_from_url("file:///a%20b/c") == "/a b/c"
    monkeypatch.chdir(tmp_path)
    assert path_from_url("file://./.agentstores") == str(tmp_path / ".agentstores")
    assert path_from_url("file://../up") == str(tmp_path.parent / "up")
    assert path_from_url("file://.") == str(tmp_path)  # the working directory itself
    assert path_from_url("file://..") == str(tmp_path.parent)
    assert path_from_url("file://localhost/srv") == "/srv"
    # The query (options) and a fragment are not part of the path; a raw space is.
    assert path_from_url("file:///srv/a?push=false") == "/srv/a"
    assert path_from_url("file:///srv/a?push=false?x") == "/srv/a"
    assert path_from_url("file:///srv/a#b#c") == "/srv/a"
    assert path_from_url("file:///srv/my store?push=1") == "/srv/my store"
    for bad in ("file://relative", "memory://x", "file:", "file://host/x"):
        with pytest.raises(UsageError):
            path_from_url(bad)
    with pytest.raises(UsageError, match="NUL"):  # an escaped NUL, refused before any open
        path_from_url("file:///srv/a%00b")
    for root in ("file:///", "file:////", "file:///a/..", "file://localhost/"):
        with pytest.raises(UsageError, match="filesystem root"):  # never write at /
            path_from_url(root)


async def test_default_url_is_the_file_backend_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTSTORES_URL", raising=False)
    assert DEFAULT_URL == "file://./.agentstores"
    async with open_stores() as stores:
        assert isinstance(stores, FileStores)
        await stores.state.save(ConversationKey("t", "s"), "u", {"ok": True})
    assert (tmp_path / ".agentstores" / "FORMAT").exists()


def test_plugin_registers_the_backend() -> None:
    (info,) = agentstores_backends()
    assert info.schemes == ("file",)
    assert info.capabilities == {"multi_process", "durable", "settable_clock"}
    assert get_registry().by_scheme("file") is not None


async def test_no_raw_id_becomes_a_path_segment(tmp_path: Path) -> None:
    root = tmp_path / "store"
    clock = ManualClock()
    async with FileStores(f"file://{root}", clock=clock, fsync=False) as stores:
        for i, tenant in enumerate(NASTY):
            for j, session in enumerate(NASTY):
                key = ConversationKey(tenant, session)
                principal = NASTY[(i + j) % len(NASTY)]
                await stores.conversations.append_messages(
                    key, principal, [Message(session, "user", {"t": tenant})]
                )
                await stores.pause_tokens.put(tenant, key, principal, 1, clock.now)
                await stores.oauth.save_user_integration(
                    UserIntegration(
                        tenant,
                        principal,
                        session,
                        PendingAuthorization(session, "a", "v", "t", "r", clock.now),
                    )
                )
        # Every key is its own conversation, readable back, none mixed with another.
        for i, tenant in enumerate(NASTY):
            for j, session in enumerate(NASTY):
                key = ConversationKey(tenant, session)
                principal = NASTY[(i + j) % len(NASTY)]
                (row,) = await stores.conversations.read_messages(key, principal)
                assert (row.id, row.content) == (session, {"t": tenant})
    _check_names(root)


ALLOWED = re.compile(
    r"^(\.?[0-9a-f]{2}|\.?[0-9a-f]{64}(\.rec)?|[0-9a-f]{64}\.[0-9a-f]{64}"
    r"|keys|owners|oauth|u|c|pending|tokens|lock|head|beat|FORMAT|state"
    r"|recording|msgs\.dat|msgs\.idx|(user|assistant|compaction)\.idx"
    r"|ids-[0-9a-f]{16}\.tbl)$"
)


def _check_names(root: Path) -> None:
    """Every name under ``root`` is a fixed name or a hex digest, and stays under it."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            assert ALLOWED.match(name), f"unexpected name {name!r} in {dirpath}"
        assert Path(dirpath).resolve().is_relative_to(root.resolve())


async def test_a_digest_collision_is_refused_not_mixed(stores: FileStores) -> None:
    key, other = ConversationKey("t", "mine"), ConversationKey("t", "other")
    await stores.conversations.append_messages(key, "u", [Message("m", "user", 1)])
    # Plant a header claiming another key in this key's directory, as a collision would.
    kdir = stores.root.key_dir(key)
    head = json.loads((Path(kdir) / "head").read_bytes())
    head["key"] = other.storage_name
    (Path(kdir) / "head").write_text(json.dumps(head))
    with pytest.raises(ConflictError):
        await stores.conversations.read_messages(key, "u")
    with pytest.raises(ConflictError):
        await stores.supervision.compare_and_swap(key, "u", None, SupervisionRow("running", "m", 1))


async def test_a_tombstone_of_another_key_is_refused_not_reused(stores: FileStores) -> None:
    """A tombstone records its key's check, not its key: one whose check is another
    key's (a digest collision with an erased key) is refused like a live header of
    another key, by reads and by writes, and is never taken over."""
    key = ConversationKey("t", "mine")
    await stores.conversations.append_messages(key, "u", [Message("m", "user", 1)])
    assert await stores.conversations.delete(key, "u")
    head_path = Path(stores.root.key_dir(key)) / "head"
    head = json.loads(head_path.read_bytes())
    assert "key" not in head and "kc" in head
    head["kc"] = "0" * len(head["kc"])
    head_path.write_text(json.dumps(head))
    with pytest.raises(ConflictError):
        await stores.conversations.read_messages(key, "u")
    with pytest.raises(ConflictError):
        await stores.state.save(key, "u", {"a": 1})
    assert json.loads(head_path.read_bytes()) == head


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("head", b"[1, 2]"),
        ("head", b'"a header"'),
        ("recording", b'{"message_id": "m"}'),
        ("recording", b'["meta"]\n{}'),
        ("recording", b"{not json\n{}"),
    ],
)
async def test_a_corrupt_file_is_refused_as_corrupt(
    name: str, content: bytes, stores: FileStores
) -> None:
    """A header that is not a JSON object, a record file with no body line or whose
    metadata is not an object: each read is refused as corrupt (unavailable, naming
    what is wrong), never taken for an absent key or read half."""
    key = ConversationKey("t", "c")
    await stores.recording.put(key, "u", RecordedEvent(1, {"e": 1}, "m1", 1))
    (Path(stores.root.key_dir(key)) / name).write_bytes(content)
    with pytest.raises(BackendUnavailableError, match="corrupt"):
        await stores.recording.read(key, "u")


async def test_an_index_shorter_than_its_count_is_corrupt_to_a_lookup_by_id(
    stores: FileStores,
) -> None:
    """A transcript index cut short (a damaged disk) is refused as corrupt when an
    append looks its ids up, as when a read reaches it: never an untyped error."""
    key = ConversationKey("t", "c")
    await stores.conversations.append_messages(key, "u", _three())
    await asyncio.to_thread(os.truncate, Path(stores.root.key_dir(key)) / INDEX, 2 * IDX.size)
    with pytest.raises(BackendUnavailableError, match="corrupt"):
        await stores.conversations.append_messages(key, "u", [Message("c", "user", "c")])


@pytest.mark.parametrize("code", [len(ROLES), 255], ids=["the first unused", "the last"])
async def test_a_truncation_before_a_damaged_entry_cuts_it_away(
    stores: FileStores, code: int
) -> None:
    """A damaged index entry is reported only by the calls that read it: truncating
    the conversation before it reads only what it keeps, and the conversation reads
    whole again (a way out that needs no repair tool)."""
    key = ConversationKey("t", "c")
    await stores.conversations.append_messages(key, "u", _three())
    index = Path(stores.root.key_dir(key)) / INDEX
    await asyncio.to_thread(_overwrite, index, 2 * IDX.size + ROLE_AT, bytes([code]))  # no role
    with pytest.raises(BackendUnavailableError, match="corrupt"):
        await stores.conversations.read_messages(key, "u")
    assert await stores.conversations.truncate(key, "u", "a", cut="after") == 2
    assert [m.id for m in await stores.conversations.read_messages(key, "u")] == ["a"]


ROLE_AT = struct.calcsize("<QQqIIII")
"""Where an index entry's role code is (``IDX``)."""


def _overwrite(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def _three() -> list[Message]:
    return [Message(name, "user", name) for name in "abc"]


async def test_os_errors_are_typed_at_the_edge(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    with pytest.raises(BackendUnavailableError):
        async with FileStores(f"file://{blocker}"):
            pass
    async with FileStores(f"file://{tmp_path / 'store'}") as stores:
        key = ConversationKey("t", "s")
        await stores.state.save(key, "u", {"a": 1})
        kdir = Path(stores.root.key_dir(key))
        (kdir / "head").write_bytes(b"{not json")
        with pytest.raises(BackendUnavailableError, match="corrupt"):
            await stores.state.load(key, "u")
        (kdir / "head").write_bytes(
            b'{"key":"t:s","owner":"u","fence":0,"shared":[],"sup":null,"conv":null}'
        )
        _block(kdir / "state")
        # Refused before anything was renamed: unavailable, and nothing changed. The
        # message names the OS error (ENOSPC, EACCES, ...: what an operator acts on).
        with pytest.raises(BackendUnavailableError, match=r"I/O failed \(E[A-Z]+\)") as refused:
            await stores.state.save(key, "u", {"a": 2})
        assert not isinstance(refused.value, UnknownOutcomeError)
        assert (await stores.supervision.read(key, "u")).fence == 0
        # Refused after the header (raising the fence) was committed: outcome unknown.
        with pytest.raises(UnknownOutcomeError):
            await stores.state.save(key, "u", {"a": 3}, epoch=5)


def test_os_errors_name_their_cause() -> None:
    """What the edge makes of an error: an OS error is unavailable and names its errno
    (or "OSError" when it has none), a call that met its bundle's own pool shut down
    (a call racing ``close``) is unavailable, anything else is a bug and propagates as
    it is."""
    from agentstores_file.errors import translate

    full = translate(OSError(errno.ENOSPC, "No space left on device"))
    assert isinstance(full, BackendUnavailableError) and "(ENOSPC)" in str(full)
    bare = translate(OSError("no errno"))
    assert isinstance(bare, BackendUnavailableError) and "(OSError)" in str(bare)
    closed = translate(RuntimeError("cannot schedule new futures after shutdown"))
    assert isinstance(closed, BackendUnavailableError) and "closed" in str(closed)
    assert translate(RuntimeError("a bug")) is None
    assert translate(ValueError("shutdown")) is None


def _block(path: Path) -> None:
    """Put a directory where a file must be replaced: the rename fails, even as root."""
    if path.exists():
        path.unlink()
    path.mkdir()
    (path / "keep").write_text("x")


async def test_another_format_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    (root / "FORMAT").write_text("something else 9\n")
    with pytest.raises(BackendUnavailableError, match="format"):
        async with FileStores(f"file://{root}"):
            pass


async def test_reopening_sees_everything(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store'}"
    key = ConversationKey("t", "s")
    async with FileStores(url) as stores:
        await stores.supervision.compare_and_swap(key, "u", None, SupervisionRow("running", "m", 2))
        await stores.conversations.append_messages(
            key, "u", [Message("a", "user", "hi"), Message("b", "assistant", "yo")], title="T"
        )
        await stores.state.save(key, "u", {"step": 3}, epoch=2)
    async with FileStores(url) as stores:
        view = await stores.supervision.read(key, "u")
        assert view.row is not None and (view.row.epoch, view.fence) == (2, 2)
        info = await stores.conversations.get_conversation(key, "u")
        assert info is not None and (info.title, info.message_count) == ("T", 2)
        assert await stores.state.load(key, "u") == {"step": 3}
        page = await stores.conversations.list_conversations("t", "u")
        assert [i.key for i in page.items] == [key]


def _entries(folder: str) -> list[str] | None:
    """What ``folder`` holds; None when there is no such folder."""
    return sorted(os.listdir(folder)) if os.path.lexists(folder) else None


async def test_an_owner_with_no_conversation_left_leaves_no_folder(stores: FileStores) -> None:
    """The listing folder ``owners/../<sha(tenant, owner)>`` goes with the owner's last
    conversation, erased by them or by the sweeper; a new conversation makes it again."""
    root = stores.root
    conv = stores.conversations
    for session, owner in (("c1", "p"), ("c2", "p"), ("d1", "q")):
        await conv.append_messages(ConversationKey("t", session), owner, [Message.user("hi")])
    p_dir, q_dir = root.owner_dir("t", "p"), root.owner_dir("t", "q")
    assert await conv.delete(ConversationKey("t", "c1"), "p")
    assert _entries(p_dir) == [ConversationKey("t", "c2").digest]
    assert await conv.delete(ConversationKey("t", "c2"), "p")
    assert _entries(p_dir) is None
    assert await conv.erase_if(ConversationKey("t", "d1"), OverCap(0))
    assert _entries(q_dir) is None
    await conv.append_messages(ConversationKey("t", "c3"), "p", [Message.user("again")])
    assert _entries(p_dir) == [ConversationKey("t", "c3").digest]
    page = await conv.list_conversations("t", "p")
    assert [i.key.session_id for i in page.items] == ["c3"]


class _DirSyncs(FileIO):
    """Records every folder made durable."""

    def __init__(self) -> None:
        super().__init__(fsync=True)
        self.synced: list[str] = []

    def sync_dir(self, path: str) -> None:
        self.synced.append(path)
        super().sync_dir(path)


async def test_a_listing_change_is_made_durable_where_it_happened(tmp_path: Path) -> None:
    """A conversation's first write lists it in its owner's folder; erasing it removes
    the entry, and with the owner's last one the owner's folder: each change is made
    durable in the folder it happened in (the owner's folder while it stays, its parent
    once it is gone), so a listing survives what the conversation survives."""
    io = _DirSyncs()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        conv = stores.conversations
        owners = stores.root.owner_dir("t", "p")
        for session in ("c1", "c2"):
            io.synced.clear()
            await conv.append_messages(ConversationKey("t", session), "p", [Message.user("hi")])
            assert owners in io.synced, io.synced
        io.synced.clear()
        assert await conv.delete(ConversationKey("t", "c1"), "p")
        assert owners in io.synced, io.synced
        io.synced.clear()
        assert await conv.delete(ConversationKey("t", "c2"), "p")
        assert _entries(owners) is None
        assert os.path.dirname(owners) in io.synced and owners not in io.synced, io.synced


async def test_a_replaced_file_is_made_durable_in_its_folder(tmp_path: Path) -> None:
    """A state save replaces the key's state file (temp, fsync, rename): the rename is
    made durable by syncing the key's own folder, by default (``FileIO`` is durable
    unless told otherwise)."""
    assert FileIO().fsync, "the I/O layer's default is durable"
    io = _DirSyncs()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        key = ConversationKey("t", "saved")
        await stores.state.save(key, "p", {"n": 1})
        io.synced.clear()
        await stores.state.save(key, "p", {"n": 2})
        assert io.synced == [stores.root.key_dir(key)]


async def test_files_an_old_life_left_are_removed_durably_before_a_transcript_starts(
    tmp_path: Path,
) -> None:
    """Transcript files a crash left in a key's folder (no header names them) are
    removed when the key's first message starts its transcript, the key's folder is
    made durable, and none of their bytes reach the new transcript."""
    io = _DirSyncs()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        key = ConversationKey("t", "old-life")
        await stores.state.save(key, "p", {"n": 1})  # the key exists, with no transcript
        kdir = stores.root.key_dir(key)
        await asyncio.to_thread(Path(kdir, "msgs.dat").write_bytes, b'{"i":"ghost"}')
        io.synced.clear()
        await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
        assert kdir in io.synced, io.synced
        assert [m.id for m in await stores.conversations.read_messages(key, "p")] == ["m"]


async def test_an_append_that_replaces_no_file_syncs_its_folder_once(tmp_path: Path) -> None:
    """An append that outgrows nothing syncs its key's folder once (for the header's
    rename) and no more; one whose id table grows also removes the old table, and syncs
    the folder once more for that."""
    io = _DirSyncs()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        key = ConversationKey("t", "syncs")
        kdir = stores.root.key_dir(key)
        conv = stores.conversations
        await conv.append_messages(key, "p", [Message("m0", "user", "hi")])
        io.synced.clear()
        await conv.append_messages(key, "p", [Message("m1", "user", "hi")])
        assert io.synced.count(kdir) == 1, io.synced
        io.synced.clear()
        await conv.append_messages(key, "p", [Message(f"g{i}", "tool", i) for i in range(40)])
        assert io.synced.count(kdir) == 2, io.synced
        assert len([n for n in os.listdir(kdir) if n.endswith(".tbl")]) == 1


class _KeepsOldTables(FileIO):
    """Refuses to remove an id table, or to sync the folder once one is removed."""

    def __init__(self, refused: str) -> None:
        super().__init__(fsync=False)
        self.refused = refused
        self.removed = False

    def unlink(self, path: str) -> bool:
        if path.endswith(".tbl"):
            if self.refused == "unlink":
                raise PermissionError(errno.EACCES, "refused", path)
            self.removed = True
        return super().unlink(path)

    def sync_dir(self, path: str) -> None:
        if self.removed and self.refused == "sync":
            raise OSError(errno.EIO, "refused", path)
        super().sync_dir(path)


@pytest.mark.parametrize("refused", ["unlink", "sync"])
async def test_a_file_left_behind_by_a_committed_write_fails_no_write(
    tmp_path: Path, refused: str
) -> None:
    """Removing a file a committed header no longer names (an id table the transcript
    outgrew) is best effort: an OS error removing it or syncing its folder after fails
    nothing, and the append it followed is committed and reads back."""
    io = _KeepsOldTables(refused)
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        key = ConversationKey("t", "keeps")
        conv = stores.conversations
        await conv.append_messages(key, "p", [Message("m0", "user", "hi")])
        grown = await conv.append_messages(
            key, "p", [Message(f"g{i}", "tool", i) for i in range(40)]
        )
        assert len(grown) == 40
        assert len(await conv.read_messages(key, "p")) == 41


class _DirFsync:
    """The ``os`` module as the I/O layer sees it, its directory fsyncs failing with
    ``code`` (a filesystem that refuses fsync on a folder says EINVAL)."""

    def __init__(self, code: int) -> None:
        self.code = code

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def fsync(self, fd: int) -> None:
        import stat

        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(self.code, os.strerror(self.code))
        os.fsync(fd)


@pytest.mark.parametrize("code", [errno.EINVAL, errno.EBADF, errno.EIO])
async def test_a_folder_refusing_fsync_is_no_failure_but_a_failed_one_is(
    code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem that refuses fsync on a folder (EINVAL, EBADF) cannot make a rename
    more durable than it is: the write succeeds. A folder fsync that fails (EIO) leaves
    the renamed write's durability unknown: the outcome is unknown."""
    from agentstores_file import fsio

    async with FileStores(f"file://{tmp_path / 'store'}") as stores:
        key = ConversationKey("t", "synced")
        await stores.state.save(key, "p", {"n": 1})
        monkeypatch.setattr(fsio, "os", _DirFsync(code))
        if code == errno.EIO:
            with pytest.raises(UnknownOutcomeError):
                await stores.state.save(key, "p", {"n": 2})
        else:
            await stores.state.save(key, "p", {"n": 2})
        monkeypatch.undo()
        assert await stores.state.load(key, "p") == {"n": 2}


class _ErasedMeanwhile(FileIO):
    """Removes the owner's (empty) listing folder right before the entry goes in, as
    another process erasing that owner's last conversation at that moment would."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.owners: str | None = None

    def step(self, what: str, path: str) -> None:
        if what == "create" and self.owners is not None and path.startswith(self.owners):
            owners, self.owners = self.owners, None
            os.rmdir(owners)


async def test_a_conversation_created_while_the_owners_folder_goes_is_listed(
    tmp_path: Path,
) -> None:
    io = _ErasedMeanwhile()
    async with FileStores(f"file://{tmp_path / 'store'}", io=io) as stores:
        io.owners = stores.root.owner_dir("t", "p")
        key = ConversationKey("t", "c1")
        await stores.conversations.append_messages(key, "p", [Message.user("hi")])
        assert io.owners is None, "the folder was removed under the append"
        page = await stores.conversations.list_conversations("t", "p")
        assert [i.key for i in page.items] == [key]


def _key_dirs(root: Path) -> set[Path]:
    return {d for d in (root / "keys").glob("*/*") if d.is_dir()}


async def test_refused_writes_leave_no_key_folder(stores: FileStores, store_url: str) -> None:
    """A refused branch (the source absent, not visible or without the message, the new
    key live or erased), a conditional append on a key that does not exist and a
    compare-and-swap expecting a row there create no key folder, however many there are."""
    root = Path(path_from_url(store_url))
    c = stores.conversations
    source, theirs = ConversationKey("t", "source"), ConversationKey("t", "theirs")
    live, erased = ConversationKey("t", "live"), ConversationKey("t", "erased")
    for key in (source, live, erased):
        await c.append_messages(key, "me", [Message("m1", "user", "hi")])
    await c.append_messages(theirs, "other", [Message("m1", "user", "hi")])
    assert await c.delete(erased, "me")
    before = _key_dirs(root)
    for i in range(100):
        fresh = f"new-{i}"
        refused = [
            c.branch(ConversationKey("t", f"absent-{i}"), "me", "m1", new_session_id=fresh),
            c.branch(theirs, "me", "m1", new_session_id=fresh),
            c.branch(source, "me", "no-such-message", new_session_id=fresh),
            c.branch(source, "me", "m1", new_session_id="live"),
            c.branch(source, "me", "m1", new_session_id="erased"),
        ]
        for call in refused:
            with pytest.raises((NotFoundError, ConflictError)):
                await call
        with pytest.raises(StaleWriteError):
            await c.append_messages(
                ConversationKey("t", fresh), "me", [Message("m", "user", 1)], expected_tail="m0"
            )
        row = SupervisionRow("running", "m", 1)
        assert not await stores.supervision.compare_and_swap(
            ConversationKey("t", fresh), "me", 0, row
        )
    assert _key_dirs(root) == before, f"{len(_key_dirs(root) - before)} key folders left behind"
    copy = await c.branch(source, "me", "m1")
    assert [m.id for m in await c.read_messages(copy, "me")] != [], "a branch still copies"
    assert len(_key_dirs(root)) == len(before) + 1


def test_the_package_names_load_lazily() -> None:
    """``agentstores_file.FileStores`` (and ``FileIO``, ``IOStats``) resolve on first use,
    so plugin discovery imports nothing else; an unknown name is an ``AttributeError``."""
    import agentstores_file
    from agentstores_file import fsio, stores

    assert agentstores_file.FileStores is stores.FileStores
    assert agentstores_file.FileIO is fsio.FileIO
    assert agentstores_file.IOStats is fsio.IOStats
    with pytest.raises(AttributeError, match="Nothing"):
        agentstores_file.Nothing  # noqa: B018


async def test_created_times_never_go_back_when_the_clock_does(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A transcript's ``created_at`` never decreases, even when the store clock steps back
    (NTP, a migrated VM): an append is stamped no earlier than the last message kept,
    after a truncation as after an append."""
    async with FileStores(f"file://{tmp_path / 'store'}", clock=clock, fsync=False) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "s")
        for name in "abc":
            await conv.append_messages(key, "u", [Message(name, "user", name)])
            clock.advance(10)
        assert await conv.truncate(key, "u", "b", cut="after") == 1
        clock.advance(-25)  # behind b's stamp
        await conv.append_messages(key, "u", [Message("d", "user", "d")])
        clock.advance(-100)  # behind every stamp
        await conv.append_messages(key, "u", [Message("e", "user", "e")])
        stamps = [(m.id, m.created_at) for m in await conv.read_messages(key, "u")]
        assert [i for i, _ in stamps] == ["a", "b", "d", "e"]
        assert [t for _, t in stamps] == sorted(t for _, t in stamps), stamps


async def test_a_conversation_written_before_metadata_reads_with_none(
    stores: FileStores,
) -> None:
    """A conversation written before conversation metadata existed (format 1 stores can
    hold one: its header's entry has no ``md``) reads with no metadata, takes metadata
    on its next append, and its branch starts with none."""
    key = ConversationKey("t", "old")
    await stores.conversations.append_messages(key, "u", [Message("a", "user", "a")])
    head = Path(stores.root.key_dir(key), "head")
    old = _read_json(head)
    del old["conv"]["md"]
    await asyncio.to_thread(head.write_bytes, json.dumps(old).encode())
    conv = stores.conversations
    assert (await conv.get_conversation(key, "u")).metadata == {}
    branch = await conv.branch(key, "u", "a")
    assert (await conv.get_conversation(branch, "u")).metadata == {}
    await conv.append_messages(key, "u", [Message("b", "user", "b")], metadata={"topic": "x"})
    assert (await conv.get_conversation(key, "u")).metadata == {"topic": "x"}


async def test_a_message_record_is_utf8_json(stores: FileStores) -> None:
    """A message's record is part of the format: UTF-8 JSON of its id, content and
    metadata, non-ASCII text kept as is (not escaped: a record is no bigger than its
    text)."""
    key = ConversationKey("t", "utf8")
    await stores.conversations.append_messages(key, "u", [Message("é✓", "user", "é", {"k": "ü"})])
    data = await asyncio.to_thread(Path(stores.root.key_dir(key), DATA).read_bytes)
    assert data == '{"i":"é✓","c":"é","m":{"k":"ü"}}'.encode()


def test_the_id_tables_hash_is_part_of_the_format() -> None:
    """The id table places a message id by its 8-byte BLAKE2b read little-endian: a store
    written earlier must find its ids at the same slots."""
    assert id_hash("é✓") == 0xE2A189EFDCC0A46E
    assert id_hash("m0") == 15034451923967951876


async def test_an_id_placed_past_the_tables_end_is_found_after_it_grows(
    stores: FileStores,
) -> None:
    """A probe that reaches the id table's last slot goes on at its first: two ids that
    both start at the last slot (of a 64-slot table and of the 128-slot one it grows
    into) are placed there and at slot 0, and re-appending the second is still a no-op
    once the table has grown."""
    wrapped = ["w65", "w381"]
    assert all(id_hash(i) & 127 == 127 for i in wrapped)
    conv = stores.conversations
    key = ConversationKey("t", "wrap")
    await conv.append_messages(key, "u", [Message(i, "user", i) for i in wrapped])
    await conv.append_messages(key, "u", [Message(f"f{i}", "tool", i) for i in range(31)])
    assert await conv.append_messages(key, "u", [Message("w381", "user", "w381")]) == []
    ids = [m.id for m in await conv.read_messages(key, "u")]
    assert len(ids) == 33 and ids.count("w381") == 1


async def test_a_truncated_message_holds_no_later_stamp_back(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A truncation forgets the stamps it dropped: the next append is stamped at the store
    clock's time when that is after the last message kept, even if a dropped message was
    stamped later (``created_at`` says when the store took the message)."""
    async with FileStores(f"file://{tmp_path / 'store'}", clock=clock, fsync=False) as stores:
        conv = stores.conversations
        key = ConversationKey("t", "s")
        for name in "abc":
            await conv.append_messages(key, "u", [Message(name, "user", name)])
            clock.advance(10)
        assert await conv.truncate(key, "u", "b", cut="after") == 1
        clock.advance(-15)  # after b's stamp, before the dropped c's
        await conv.append_messages(key, "u", [Message("d", "user", "d")])
        last = (await conv.read_messages(key, "u"))[-1]
        assert (last.id, last.created_at) == ("d", clock.now)


class _Listing(FileIO):
    """Lists every folder in name order, or the reverse (a filesystem may list in any)."""

    def __init__(self, reverse: bool) -> None:
        super().__init__(fsync=False)
        self.reverse = reverse

    def listdir(self, path: str) -> list[str]:
        return sorted(super().listdir(path), reverse=self.reverse)


@pytest.mark.parametrize("reverse", [False, True], ids=["in name order", "in reverse"])
async def test_an_erase_leaves_no_data_file_whatever_the_listing_order(
    tmp_path: Path, reverse: bool
) -> None:
    """Erasing a key removes every data file it holds (messages, state, recording, pause
    tokens) and keeps only its lock, its tombstone and the emptied tokens folder, in
    whatever order the folder lists them (the tokens folder first, too)."""
    async with FileStores(f"file://{tmp_path / 'store'}", io=_Listing(reverse)) as stores:
        key = ConversationKey("t", "s")
        await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
        await stores.state.save(key, "p", {"a": 1})
        await stores.recording.put(key, "p", RecordedEvent(0, "x", "m", 4))
        await stores.pause_tokens.put("t", key, "p", 1, stores.root.now() + timedelta(hours=1))
        kdir = Path(stores.root.key_dir(key))
        assert await stores.conversations.delete(key, "p")
    assert sorted(await asyncio.to_thread(os.listdir, kdir)) == ["head", "lock", "tokens"]
    assert await asyncio.to_thread(os.listdir, kdir / "tokens") == []


LAYOUT = [
    "FORMAT",
    "keys",
    "keys/e9",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592/beat",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592/head",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592/ids-<random>.tbl",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592/lock",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592/msgs.dat",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592/msgs.idx",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592/state",
    "keys/e9/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592/user.idx",
    "lock",
    "oauth",
    "oauth/c",
    "oauth/c/e3",
    "oauth/c/e3/e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8",
    "oauth/c/e3/e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8/5e12afeaaf89408e6914798bc50be2047bcd9443a01a380c23c281e531770348.rec",
    "oauth/c/e3/e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8/lock",
    "oauth/pending",
    "oauth/pending/56",
    "oauth/pending/56/56af4bde70a47ae7d0f1ebb30e45ed336165d5c9ec00ba9a92311e33a4256d74",
    "oauth/pending/56/56af4bde70a47ae7d0f1ebb30e45ed336165d5c9ec00ba9a92311e33a4256d74/b057c2ae5545b1a86229d85fb6e984072734739fe1246fe49bb1a181bf6f461a.5e12afeaaf89408e6914798bc50be2047bcd9443a01a380c23c281e531770348",
    "oauth/u",
    "oauth/u/b0",
    "oauth/u/b0/b057c2ae5545b1a86229d85fb6e984072734739fe1246fe49bb1a181bf6f461a",
    "oauth/u/b0/b057c2ae5545b1a86229d85fb6e984072734739fe1246fe49bb1a181bf6f461a/5e12afeaaf89408e6914798bc50be2047bcd9443a01a380c23c281e531770348.rec",
    "oauth/u/b0/b057c2ae5545b1a86229d85fb6e984072734739fe1246fe49bb1a181bf6f461a/lock",
    "owners",
    "owners/ed",
    "owners/ed/ed388b94ab55ed9d8f56548657b023ebe91b6894666236b9820b85e269ff81b4",
    "owners/ed/ed388b94ab55ed9d8f56548657b023ebe91b6894666236b9820b85e269ff81b4/e92f45a0422baa60ecdfda7642da442bd0331f9a1612d2d678889342d70b2592",
]
"""Every file and folder a store holds after one write of each kind (a message, state,
a lease, an OAuth client and a user integration with a pending authorization): the
on-disk format (``FORMAT``) that stores written by earlier versions are read in. A change
here is a format change: the FORMAT line moves with it and old stores are migrated."""


async def test_the_on_disk_layout_is_the_format(tmp_path: Path) -> None:
    root = tmp_path / "store"
    async with FileStores(f"file://{root}", fsync=False) as stores:
        key = ConversationKey("t", "s")
        await stores.conversations.append_messages(key, "p", [Message("m1", "user", "hi")])
        await stores.state.save(key, "p", {"a": 1})
        await stores.supervision.compare_and_swap(
            key, "p", None, SupervisionRow("running", "m2", 1)
        )
        await stores.oauth.save_client_info(ClientInfo("t", "srv", {"id": "c"}))
        pending = PendingAuthorization(
            "st", "https://a", "v", "https://t", "https://r", datetime(2031, 1, 1, tzinfo=UTC)
        )
        await stores.oauth.save_user_integration(UserIntegration("t", "u", "srv", pending))
    assert _tree(root) == LAYOUT


async def test_a_tombstone_records_its_keys_check(tmp_path: Path) -> None:
    """An erased key's tombstone records a check of its key, part of the format: a store
    written earlier must read its tombstones as theirs (not as a colliding key's)."""
    root = tmp_path / "store"
    async with FileStores(f"file://{root}", fsync=False) as stores:
        key = ConversationKey("t", "gone")
        await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
        await stores.conversations.delete(key, "p")
        head = _read_json(Path(stores.root.key_dir(key), "head"))
    assert head["kc"] == "f2e919b78a0d4c9ed34665a11572ebfe"


class _Paths(FileIO):
    """Records the path of every mutating step."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.paths: list[str] = []

    def step(self, what: str, path: str) -> None:
        if not path.isdigit():  # a file descriptor's number, for writes to an open file
            self.paths.append(path)


async def test_a_write_puts_nothing_outside_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file a write makes or replaces (a redo's body, a temporary) lives in the
    store, whatever the process's working folder."""
    monkeypatch.chdir(tmp_path)
    io = _Paths()
    root = tmp_path / "store"
    async with FileStores(f"file://{root}", io=io) as stores:
        key = ConversationKey("t", "s")
        await stores.state.save(key, "p", {"a": 1}, epoch=3)  # a header change: a redo
        await stores.recording.put(key, "p", RecordedEvent(0, "x", "m", 4))
        await stores.pause_tokens.put("t", key, "p", 1, stores.root.now() + timedelta(hours=1))
        assert await stores.state.load(key, "p") == {"a": 1}
    assert io.paths and _outside(io.paths, root) == []


def _outside(paths: list[str], root: Path) -> list[str]:
    """Which of ``paths`` are neither ``root`` nor in it."""
    return [p for p in paths if not (os.path.abspath(p) + os.sep).startswith(f"{root}{os.sep}")]


def _read_json(path: Path) -> Any:
    return json.loads(path.read_bytes())


def _tree(root: Path) -> list[str]:
    """The entries under ``root``; an id table's name carries a random part, drawn anew
    each time the table is built."""
    names = (str(p.relative_to(root)) for p in root.rglob("*"))
    return sorted(re.sub(r"ids-[0-9a-f]{16}\.tbl$", "ids-<random>.tbl", n) for n in names)


async def test_every_first_write_reclaims_a_key_whose_tombstone_lapsed(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Once an erased key's tombstone lapses, the first write of any store claims it
    afresh for its caller (clearing what the old life left): state, a pause token, a
    recording, a lease, messages. Nothing of the old life is seen."""
    url = f"file://{tmp_path / 'store'}"
    ttl = timedelta(minutes=1)
    async with FileStores(url, clock=clock, fsync=False, tombstone_ttl=ttl) as stores:
        writes = {
            "state": lambda k: stores.state.save(k, "new", {"v": 2}),
            "token": lambda k: stores.pause_tokens.put("t", k, "new", 2, clock.now + ttl * 10),
            "recording": lambda k: stores.recording.put(k, "new", RecordedEvent(0, "x", "m", 1)),
            "lease": lambda k: stores.supervision.compare_and_swap(
                k, "new", None, SupervisionRow("running", "m", 1)
            ),
            "messages": lambda k: stores.conversations.append_messages(
                k, "new", [Message("n", "user", 2)]
            ),
        }
        for name in writes:
            key = ConversationKey("t", name)
            await stores.conversations.append_messages(key, "old", [Message("o", "user", 1)])
            await stores.state.save(key, "old", {"v": 1})
            await stores.conversations.delete(key, "old")
        clock.advance(ttl.total_seconds() + 1)
        for name, write in writes.items():
            key = ConversationKey("t", name)
            await write(key)
            with pytest.raises(NotOwnedError):  # the key is the new caller's now
                await stores.state.save(key, "old", {"v": 3})
            assert await stores.state.load(key, "old") == {}, name
            assert [m.id for m in await stores.conversations.read_messages(key, "new")] in (
                [],
                ["n"],
            ), name


async def test_a_delete_on_a_lapsed_key_removes_nothing_and_says_so(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A key whose tombstone lapsed is as good as absent: deleting its recording or its
    supervision row finds nothing (False), and its state stays empty."""
    ttl = timedelta(minutes=1)
    url = f"file://{tmp_path / 'store'}"
    async with FileStores(url, clock=clock, fsync=False, tombstone_ttl=ttl) as stores:
        key = ConversationKey("t", "lapsed")
        await stores.recording.put(key, "p", RecordedEvent(0, "x", "m", 1))
        await stores.conversations.delete(key, "p")
        clock.advance(ttl.total_seconds() + 1)
        assert not await stores.recording.delete(key, "p", "m")
        assert not await stores.supervision.delete(key, "p", "m", 1)
        await stores.state.delete(key, "p")
        assert await stores.state.load(key, "p") == {}


class _Trickle:
    """The ``os`` module as the I/O layer sees it, but every positioned read and write
    moves at most a few bytes, as an interrupted call or a network filesystem may."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.short_reads = self.short_writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        self.short_reads += size > self.step
        return os.pread(fd, min(size, self.step), offset)

    def pwrite(self, fd: int, data: Any, offset: int) -> int:
        self.short_writes += len(data) > self.step
        return os.pwrite(fd, memoryview(data)[: self.step], offset)


@pytest.mark.parametrize("step", [1, 7])
async def test_short_positioned_reads_and_writes_are_completed(
    step: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A positioned read or write that moves fewer bytes than asked is continued until
    all of it is moved (or a read meets the end of the file): a transcript, a state, a
    heartbeat written and read that way read back the same as on a store without short
    calls."""
    from agentstores_file import fsio

    async def workload(url: str) -> list[Any]:
        async with FileStores(url) as stores:
            key = ConversationKey("t", "short")
            msgs = [Message(f"m{i}", "user", {"text": "hello there " * i}) for i in range(12)]
            await stores.conversations.append_messages(key, "p", msgs[:5])
            await stores.conversations.append_messages(key, "p", msgs[5:])
            await stores.state.save(key, "p", {"plan": ["a", "b"] * 20})
            row = SupervisionRow("running", "turn", 1)
            assert await stores.supervision.compare_and_swap(key, "p", None, row)
            beat = SupervisionRow("running", "beat-message", 1)
            assert await stores.supervision.compare_and_swap(key, "p", 1, beat)
            transcript = await stores.conversations.get_transcript(key, "p")
            view = await stores.supervision.read(key, "p")
            return [
                [m.id for m in transcript],
                [m.content for m in transcript],
                [m.id for m in (await stores.conversations.tail(key, "p", 3)).messages],
                [m.id for m in await stores.conversations.get_transcript(key, "p", index=-2)],
                await stores.state.load(key, "p"),
                None
                if view.row is None
                else (view.row.status, view.row.message_id, view.row.epoch),
            ]

    expected = await workload(f"file://{tmp_path / 'plain'}")
    trickle = _Trickle(step)
    monkeypatch.setattr(fsio, "os", trickle)
    assert await workload(f"file://{tmp_path / 'short'}") == expected
    assert trickle.short_reads and trickle.short_writes


async def test_push_is_on_by_default_and_chosen_by_url_or_keyword(tmp_path: Path) -> None:
    """``push`` (other processes' writes wake this one's followers) is on unless the URL
    (``?push=false``, also 0/no/off) or the keyword turns it off; the keyword wins; a
    value that is not a boolean, or an option the backend does not know, is refused
    naming the backend. A closed bundle leaves no change-check thread behind."""
    url = f"file://{tmp_path / 'store'}"
    assert FileStores(url).push is True
    for word in ("false", "0", "no", "off", " OFF "):
        assert FileStores(f"{url}?push={word}").push is False, word
    for word in ("true", "1", "yes", "on"):
        assert FileStores(f"{url}?push={word}").push is True, word
    assert FileStores(f"{url}?push=false", push=True).push is True
    assert FileStores(url, push=False).push is False
    with pytest.raises(UsageError, match="push"):
        FileStores(f"{url}?push=maybe")
    with pytest.raises(UsageError, match="push"):
        FileStores(url, push="yes")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown file URL option 'pushed'") as unknown:
        FileStores(f"{url}?pushed=true")
    assert "keyword arguments" in str(unknown.value)  # where fsync, workers... do go
    async with FileStores(url, push=False) as stores:
        assert stores.watcher is None
    async with FileStores(url) as stores:
        assert stores.watcher is not None
        await stores.state.save(ConversationKey("t", "k"), "p", {"a": 1})
    assert not [t for t in threading.enumerate() if t.name == "agentstores-file-changes"]


def test_the_bundles_documented_defaults_and_refusals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``FileStores`` documents: ``./.agentstores`` when no URL is given, fsync on,
    a tombstone kept 30 days, the shared thread pool unless ``workers`` asks for a
    positive number of threads of its own."""
    from agentstores.stores import kit

    monkeypatch.chdir(tmp_path)
    assert FileStores().path == str(tmp_path / ".agentstores")

    url = f"file://{tmp_path / 'store'}"
    stores = FileStores(url)
    assert stores.url == url and stores.path == str(tmp_path / "store")
    assert stores.io.fsync is True
    assert stores.root.tombstone_ttl == timedelta(days=30) == kit.DEFAULT_TOMBSTONE_TTL
    assert FileStores(url, fsync=False).io.fsync is False
    assert FileStores(url, tombstone_ttl=timedelta(hours=1)).root.tombstone_ttl == timedelta(
        hours=1
    )
    assert stores._runner.workers is None  # the process-wide pool
    assert FileStores(url, workers=1)._runner.workers == 1  # a pool of its own
    for bad in (0, -1, "2", 1.5):
        with pytest.raises(UsageError, match="workers"):
            FileStores(url, workers=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "options"),
    [
        pytest.param("", {"tombstone_ttl": 0}, id="0"),
        pytest.param("", {"tombstone_ttl": timedelta(seconds=-1)}, id="minus-1s"),
        pytest.param("", {"tombstone_ttl": timedelta(days=36_526)}, id="100y+1d"),
        pytest.param("", {"tombstone_ttl": True}, id="bool"),
        pytest.param("", {"tombstone_ttl": "soon"}, id="text"),
        pytest.param("?tombstone_ttl=soon", {}, id="url-query"),  # a keyword only here
    ],
)
def test_a_bad_tombstone_ttl_is_refused_by_name_when_the_bundle_is_made(
    tmp_path: Path, query: str, options: dict[str, object]
) -> None:
    """Before, any value was taken and a bad one failed, or went wrong, at the first erase."""
    with pytest.raises(UsageError, match="tombstone_ttl") as refused:
        FileStores(f"file://{tmp_path / 'store'}{query}", **options)  # type: ignore[arg-type]
    assert refused.value.context["option"] == "tombstone_ttl"
    assert not (tmp_path / "store").exists(), "refused before anything was written"


@pytest.mark.parametrize("ttl", [timedelta(days=36_525), timedelta(seconds=1)], ids=["100y", "1s"])
async def test_a_tombstone_ttl_up_to_100_years_is_kept(
    tmp_path: Path, clock: ManualClock, ttl: timedelta
) -> None:
    url = f"file://{tmp_path / 'store'}"
    key = ConversationKey("t", "ttl")
    async with FileStores(url, clock=clock, fsync=False, tombstone_ttl=ttl) as stores:
        assert stores.root.tombstone_ttl == ttl
        await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
        erased_at = clock.now
        assert await stores.conversations.delete(key, "p")
        clock.now = erased_at + ttl - timedelta(microseconds=1)
        with pytest.raises(ErasedError) as erased:
            await stores.conversations.append_messages(key, "p", [Message("n", "user", "late")])
        assert erased.value.until == erased_at + ttl
        clock.now = erased_at + ttl
        await stores.conversations.append_messages(key, "p", [Message("n", "user", "new")])


def test_a_file_another_user_owns_keeps_its_mode_and_opens() -> None:
    """A file the store opens that another user owns (only its owner may change its
    mode) is opened with its mode as it is, not refused: here ``/dev/null``, opened by a
    user who does not own it (a forked child, made ``nobody`` first when run as root)."""
    from agentstores_file import fsio

    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 1
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            os.close(fsio.open_private(os.devnull, os.O_RDWR))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.stat(os.devnull).st_mode & 0o777 == 0o666
