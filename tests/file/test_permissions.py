"""A file store is its owner's alone: every file it creates is 0600 and every folder 0700,
whatever the umask, and another local user can neither read a file nor list a folder of
it. Opening a store that an older version left open closes its root."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentstores.keys import ConversationKey
from agentstores.models import (
    ClientInfo,
    Message,
    PendingAuthorization,
    RecordedEvent,
    SupervisionRow,
    UserIntegration,
)
from agentstores_file.stores import FileStores

SECRET_TEXT = "the user's private words"


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process umask for the test (``request.param``), restored after it."""
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A folder every user may enter and list (pytest's own tmp folders are 0700, which
    would hide the store from another user whatever its modes)."""
    folder = Path(tempfile.mkdtemp(prefix="agentstores-perm-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def write_everything(stores: FileStores, session: str = "session") -> None:
    """One write of every kind through every store: claim and heartbeat, a recording,
    state, appends, a share and a branch, a pause token, OAuth records."""
    key = ConversationKey("tenant", session)
    later = datetime.now(UTC) + timedelta(hours=1)
    await stores.supervision.compare_and_swap(key, "u", None, SupervisionRow("running", "m1", 1))
    await stores.supervision.compare_and_swap(key, "u", 1, SupervisionRow("running", "m1", 1))
    await stores.recording.put(key, "u", RecordedEvent(0, {"text": SECRET_TEXT}, "m1", 1))
    await stores.state.save(key, "u", {"memory": SECRET_TEXT}, epoch=1)
    await stores.conversations.append_messages(
        key, "u", [Message("m0", "user", {"text": SECRET_TEXT})], epoch=1, title="private"
    )
    await stores.conversations.share(key, "u", "friend")
    await stores.conversations.branch(key, "u", "m0", new_session_id=f"{session}-copy")
    await stores.pause_tokens.put("token", key, "u", {"resume": SECRET_TEXT}, later, epoch=1)
    await stores.oauth.save_user_integration(
        UserIntegration(
            "tenant",
            "u",
            "mail",
            PendingAuthorization("state", "https://a", "verifier", "https://t", "https://r", later),
            {"access_token": "tok"},
        )
    )
    await stores.oauth.save_client_info(ClientInfo("tenant", "mail", {"client_secret": "cs"}))


def tree(root: Path) -> list[Path]:
    """``root`` and everything under it."""
    found = [root]
    for dirpath, dirnames, filenames in os.walk(root):
        found.extend(Path(dirpath, name) for name in dirnames + filenames)
    return found


def loose(root: Path) -> list[str]:
    """Every entry whose mode is not exactly 0700 (folders) or 0600 (files)."""
    wrong = []
    for path in tree(root):
        mode = path.lstat().st_mode
        want = 0o700 if stat.S_ISDIR(mode) else 0o600
        if stat.S_IMODE(mode) != want:
            wrong.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(root.parent)}")
    return wrong


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o000, 0o277], indirect=True, ids=oct)
async def test_every_entry_is_the_owners_alone(umask: int, tmp_path: Path) -> None:
    """0o277 takes the owner's own write bit away: the store still writes, and still
    leaves its entries 0600/0700."""
    root = tmp_path / "parents" / "store"  # its parents are created too
    async with FileStores(f"file://{root}", fsync=False) as stores:
        await write_everything(stores)
        kinds = {p.name for p in tree(root)}
        assert {"head", "beat", "lock", "state", "recording", "FORMAT", "msgs.dat"} <= kinds
        assert loose(root) == []
    assert stat.S_IMODE((tmp_path / "parents").stat().st_mode) == 0o700


async def test_a_temp_file_left_open_by_a_crash_is_tightened(tmp_path: Path) -> None:
    """A temp file left by an older version's crash keeps its mode when opened again:
    the rename would carry it onto the data file."""
    root = tmp_path / "store"
    key = ConversationKey("tenant", "session")
    async with FileStores(f"file://{root}", fsync=False) as stores:
        await stores.state.save(key, "u", {"v": 1})
        state = Path(stores.root.key_dir(key)) / "state"
        left = state.with_name(f".{state.name}.tmp")
        left.write_bytes(b"half")
        left.chmod(0o644)
        await stores.state.save(key, "u", {"v": 2})
    assert stat.S_IMODE(state.stat().st_mode) == 0o600


async def test_opening_closes_a_root_left_open(tmp_path: Path) -> None:
    """A store written with 0755 folders and 0644 files (as before) is closed at the root
    on open; files keep their modes until rewritten."""
    root = tmp_path / "store"
    async with FileStores(f"file://{root}", fsync=False) as stores:
        await write_everything(stores)
    for path in tree(root):
        path.chmod(0o755 if path.is_dir() else 0o644)
    async with FileStores(f"file://{root}", fsync=False) as stores:
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        await write_everything(stores, "another")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def unreadable_to_another_user(root: Path) -> list[str]:
    """What of ``root`` the user ``nobody`` could read or list, as that user sees it.

    As root (here and in CI) a child process drops to ``nobody``, checks it can list the
    store's parent (so a refusal below is the store's doing), then tries ``cat`` on every
    file and ``ls`` on every folder. Unprivileged, the kernel's check for another user is
    done on the mode bits instead: no group or other bit on any entry.
    """
    entries = tree(root)
    if os.geteuid() != 0:
        return [str(p) for p in entries if stat.S_IMODE(p.lstat().st_mode) & 0o077]
    nobody = pwd.getpwnam("nobody")
    script = (
        'ls -- "$1" >/dev/null || exit 3\n'
        "shift\n"
        'for p in "$@"; do\n'
        '  if [ -d "$p" ]; then ls -- "$p" >/dev/null 2>&1 && echo "listed $p"\n'
        '  else cat -- "$p" >/dev/null 2>&1 && echo "read $p"; fi\n'
        "done\n"
        "exit 0\n"
    )
    done = subprocess.run(
        ["/bin/sh", "-c", script, "sh", str(root.parent), *map(str, entries)],
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"nobody could not list the store's parent: {done.stderr}"
    return done.stdout.splitlines()


@pytest.mark.parametrize("umask", [0o022], indirect=True, ids=oct)
async def test_another_user_reads_nothing(umask: int, open_parent: Path) -> None:
    root = open_parent / "store"
    async with FileStores(f"file://{root}", fsync=False) as stores:
        await write_everything(stores)
    assert len(tree(root)) > 40
    assert unreadable_to_another_user(root) == []


async def test_another_user_reads_nothing_of_a_store_written_open(open_parent: Path) -> None:
    root = open_parent / "store"
    async with FileStores(f"file://{root}", fsync=False) as stores:
        await write_everything(stores)
    for path in tree(root):
        path.chmod(0o755 if path.is_dir() else 0o644)
    async with FileStores(f"file://{root}", fsync=False):
        pass
    assert unreadable_to_another_user(root) == []


class _Creations:
    """The ``os`` module as the I/O layer sees it, recording the mode every file and
    folder is created with."""

    def __init__(self) -> None:
        self.files: list[int | None] = []
        self.folders: list[int | None] = []
        self.leaky: list[str] = []
        """Opens a child process could inherit, or of a folder not opened as one."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def open(self, path: str, flags: int, mode: int | None = None) -> int:
        if flags & os.O_CREAT:
            self.files.append(mode)
        if not flags & os.O_CLOEXEC:
            self.leaky.append(f"not close-on-exec: {path}")
        if os.path.isdir(path) and not flags & os.O_DIRECTORY:
            self.leaky.append(f"a folder not opened as one: {path}")
        return os.open(path, flags) if mode is None else os.open(path, flags, mode)

    def mkdir(self, path: str, mode: int | None = None) -> None:
        self.folders.append(mode)
        os.mkdir(path) if mode is None else os.mkdir(path, mode)


async def test_entries_are_created_private_not_made_private_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file is created 0600 and every folder 0700: never created looser and then
    tightened, which would leave a moment when another user could open it. And every
    descriptor is close-on-exec (a process the application starts inherits none), a
    folder opened as one."""
    from agentstores_file import fsio

    created = _Creations()
    monkeypatch.setattr(fsio, "os", created)
    async with FileStores(f"file://{tmp_path / 'store'}") as stores:  # folders synced too
        await write_everything(stores)
    assert created.files and set(created.files) == {0o600}, created.files
    assert created.folders and set(created.folders) == {0o700}, created.folders
    assert created.leaky == []


async def test_a_root_folder_another_user_owns_keeps_its_mode(tmp_path: Path) -> None:
    """Opening closes a root folder left open only when it is ours: another user's
    folder keeps its mode (only its owner may decide who enters it)."""
    root = tmp_path / "store"
    async with FileStores(f"file://{root}", fsync=False) as stores:
        await write_everything(stores)
    root.chmod(0o755)
    if os.geteuid() == 0:  # as root (here and in CI): the folder handed to nobody
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        async with FileStores(f"file://{root}", fsync=False):
            pass
        assert stat.S_IMODE(root.stat().st_mode) == 0o755
    else:  # unprivileged, no folder of another user can be made: ours is closed
        async with FileStores(f"file://{root}", fsync=False):
            pass
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
