"""The record stores on files (pause tokens, the recording, agent state) and the record
encoding: what a write after a crash finishes first, what a refusal names, which files a
call leaves untouched, and what bytes land on disk."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agentstores.errors import (
    AgentStoresError,
    AlreadyClaimedError,
    BackendUnavailableError,
    ConflictError,
    ErasedError,
    FencedError,
    NotFoundError,
    NotOwnedError,
)
from agentstores.keys import ConversationKey
from agentstores.models import ClientInfo, Message, RecordedEvent
from agentstores.stores import kit
from agentstores_file.fsio import FileIO, IOStats
from agentstores_file.pause_tokens import token_name
from agentstores_file.stores import FileStores

from .conftest import ManualClock

K = ConversationKey("tenant", "key")
OWNER = "owner"
TOKEN = "tok"


class Crash(BaseException):
    """Stops a call dead at one chosen step, like SIGKILL: no handler in the backend runs."""


class CrashIO(FileIO):
    """Crashes once, at the first mutating step ``what`` on exactly ``path``."""

    def __init__(self, *, stats: IOStats | None = None) -> None:
        super().__init__(fsync=False, stats=stats)
        self.crash_at: tuple[str, str] | None = None

    def step(self, what: str, path: str) -> None:
        if self.crash_at == (what, path):
            self.crash_at = None
            raise Crash(f"{what} {path}")


def _open(tmp_path: Path, clock: ManualClock, stats: IOStats | None = None) -> FileStores:
    return FileStores(f"file://{tmp_path / 'store'}", io=CrashIO(stats=stats), clock=clock)


def _token_path(stores: FileStores, key: ConversationKey = K, token_id: str = TOKEN) -> str:
    return os.path.join(stores.root.key_dir(key), token_name(token_id))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _files_under(folder: str, suffix: str = "") -> list[bytes]:
    """The contents of every file under ``folder`` whose name ends with ``suffix``."""
    return [
        _read(os.path.join(path, name))
        for path, _, names in os.walk(folder)
        for name in names
        if name.endswith(suffix)
    ]


def _token_meta(stores: FileStores, token_id: str = TOKEN) -> dict[str, object]:
    """The metadata line of a token's file as stored."""
    meta: dict[str, object] = json.loads(
        _read(_token_path(stores, token_id=token_id)).split(b"\n")[0]
    )
    return meta


def _crash_at(stores: FileStores, what: str, path: str) -> None:
    assert isinstance(stores.io, CrashIO)
    stores.io.crash_at = (what, path)


def _stat(path: str) -> tuple[bytes, int]:
    with open(path, "rb") as f:
        return f.read(), os.stat(path).st_ino


# --- pause tokens ----------------------------------------------------------------------


async def test_a_claim_after_a_put_cut_short_at_its_rename_is_still_single_use(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A put that claimed the key crashed after its header (the commit point) but before
    renaming the token into place: the claim that follows finishes that rename first, so
    its "claimed" mark is what every later claim reads, and the token is claimed once."""
    async with _open(tmp_path, clock) as stores:
        _crash_at(stores, "replace", _token_path(stores))
        with pytest.raises(Crash):
            await stores.pause_tokens.put(TOKEN, K, OWNER, {"p": 1}, clock.now + timedelta(hours=1))
        assert await stores.pause_tokens.claim(TOKEN, K, OWNER) == {"p": 1}
        with pytest.raises(AlreadyClaimedError):
            await stores.pause_tokens.claim(TOKEN, K, OWNER)
        with pytest.raises(AlreadyClaimedError):
            await stores.pause_tokens.claim(TOKEN, K, OWNER)


async def test_an_erased_keys_tokens_are_not_found_whatever_its_leftovers_hold(
    tmp_path: Path, clock: ManualClock
) -> None:
    """An erasure that crashed after its tombstone leaves token files behind: a claim or
    abandon of such a token is NotFound (naming its key) without reading them, so even a
    damaged leftover is no error."""
    async with _open(tmp_path, clock) as stores:
        await stores.pause_tokens.put(TOKEN, K, OWNER, {"p": 1}, clock.now + timedelta(hours=1))
        _crash_at(stores, "unlink", _token_path(stores))
        with pytest.raises(Crash):
            await stores.conversations.delete(K, OWNER)
        _write(_token_path(stores), b"\x00damaged")
        with pytest.raises(NotFoundError) as claimed:
            await stores.pause_tokens.claim(TOKEN, K, OWNER)
        assert claimed.value.key == K
        with pytest.raises(NotFoundError) as abandoned:
            await stores.pause_tokens.abandon(TOKEN, K, OWNER)
        assert abandoned.value.key == K


async def test_a_token_records_claimed_and_abandoned_on_disk(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The token file's metadata line says "claimed" after a claim and "abandoned" after
    an abandon (the on-disk format), and a later claim's refusal says which."""
    expires = clock.now + timedelta(hours=1)
    async with _open(tmp_path, clock) as stores:
        await stores.pause_tokens.put(TOKEN, K, OWNER, {"p": 1}, expires)
        x = kit.to_micros(expires)
        assert _token_meta(stores) == {"t": TOKEN, "o": OWNER, "x": x, "s": "pending"}
        await stores.pause_tokens.claim(TOKEN, K, OWNER)
        assert _token_meta(stores) == {"t": TOKEN, "o": OWNER, "x": x, "s": "claimed"}
        with pytest.raises(AlreadyClaimedError) as again:
            await stores.pause_tokens.claim(TOKEN, K, OWNER)
        assert str(again.value).endswith("is claimed")

        await stores.pause_tokens.put("tok2", K, OWNER, {"p": 2}, expires)
        await stores.pause_tokens.abandon("tok2", K, OWNER)
        assert _token_meta(stores, "tok2") == {"t": "tok2", "o": OWNER, "x": x, "s": "abandoned"}
        with pytest.raises(AlreadyClaimedError) as after:
            await stores.pause_tokens.claim("tok2", K, OWNER)
        assert str(after.value).endswith("is abandoned")


async def test_claim_and_abandon_rewrite_only_the_token_file(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A claim or abandon changes no header: the key's head file keeps its bytes and its
    inode (so push followers are not woken), and the token file is the one file replaced."""
    stats = IOStats()
    expires = clock.now + timedelta(hours=1)
    async with _open(tmp_path, clock, stats) as stores:
        head = stores.root.head_path(stores.root.key_dir(K))
        await stores.pause_tokens.put(TOKEN, K, OWNER, {"p": 1}, expires)
        await stores.pause_tokens.put("tok2", K, OWNER, {"p": 2}, expires)
        before = _stat(head)
        stats.reset()
        await stores.pause_tokens.claim(TOKEN, K, OWNER)
        assert (stats.replaces, stats.writes) == (1, 1)
        assert _stat(head) == before
        stats.reset()
        await stores.pause_tokens.abandon("tok2", K, OWNER)
        assert (stats.replaces, stats.writes) == (1, 1)
        assert _stat(head) == before


async def test_abandoning_an_abandoned_token_writes_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A second abandon of the same token is a no-op on disk: no write, no rename, and the
    token file keeps its inode."""
    stats = IOStats()
    async with _open(tmp_path, clock, stats) as stores:
        await stores.pause_tokens.put(TOKEN, K, OWNER, {"p": 1}, clock.now + timedelta(hours=1))
        await stores.pause_tokens.abandon(TOKEN, K, OWNER)
        before = _stat(_token_path(stores))
        stats.reset()
        await stores.pause_tokens.abandon(TOKEN, K, OWNER)
        assert (stats.writes, stats.replaces) == (0, 0)
        assert _stat(_token_path(stores)) == before


# --- recording and state ---------------------------------------------------------------


async def test_a_recording_delete_after_a_put_cut_short_at_its_rename_removes_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A put that claimed the key crashed after its header but before renaming the
    snapshot into place: the delete that follows finishes that rename first, so the
    snapshot it removes stays removed."""
    async with _open(tmp_path, clock) as stores:
        recording = os.path.join(stores.root.key_dir(K), "recording")
        _crash_at(stores, "replace", recording)
        event = RecordedEvent(3, {"text": "partial"}, "m1", 1)
        with pytest.raises(Crash):
            await stores.recording.put(K, OWNER, event)
        assert await stores.recording.read(K, OWNER) == event
        assert await stores.recording.delete(K, OWNER, "m1") is True
        assert await stores.recording.read(K, OWNER) is None
        assert await stores.recording.delete(K, OWNER, "m1") is False


async def test_a_recording_put_after_a_put_cut_short_at_its_rename_lands(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A recording put crashed after its header named the rename still due: the next
    put (one that changes no header) finishes that rename first, so its own snapshot is
    the one read back, not the crashed put's."""
    async with _open(tmp_path, clock) as stores:
        _crash_at(stores, "replace", os.path.join(stores.root.key_dir(K), "recording"))
        with pytest.raises(Crash):
            await stores.recording.put(K, OWNER, RecordedEvent(1, {"text": "a"}, "m1", 1))
        later = RecordedEvent(2, {"text": "ab"}, "m1", 1)
        assert await stores.recording.put(K, OWNER, later) is True
        assert await stores.recording.read(K, OWNER) == later


async def _refusals(
    stores: FileStores, key: ConversationKey, expires: datetime
) -> list[AgentStoresError]:
    """Each refusal of a write to a token, the recording or the state of ``key`` (fence
    2): another owner, an epoch below the fence, then an erased key."""
    errors: list[AgentStoresError] = []
    for kind, call in (
        (NotOwnedError, lambda: stores.pause_tokens.put("t2", key, "intruder", 1, expires)),
        (
            NotOwnedError,
            lambda: stores.recording.put(key, "intruder", RecordedEvent(1, 1, "m2", 2)),
        ),
        (NotOwnedError, lambda: stores.recording.delete(key, "intruder", "m1")),
        (NotOwnedError, lambda: stores.state.save(key, "intruder", {"s": 2})),
        (NotOwnedError, lambda: stores.state.delete(key, "intruder")),
        (FencedError, lambda: stores.pause_tokens.put("t2", key, OWNER, 1, expires, epoch=1)),
        (FencedError, lambda: stores.recording.put(key, OWNER, RecordedEvent(1, 1, "m2", 1))),
        (FencedError, lambda: stores.recording.delete(key, OWNER, "m1", epoch=1)),
        (FencedError, lambda: stores.state.save(key, OWNER, {"s": 2}, epoch=1)),
        (FencedError, lambda: stores.state.delete(key, OWNER, epoch=1)),
    ):
        with pytest.raises(kind) as refused:
            await call()
        errors.append(refused.value)
    assert await stores.conversations.delete(key, OWNER)
    for call in (
        lambda: stores.pause_tokens.put("t2", key, OWNER, 1, expires),
        lambda: stores.recording.put(key, OWNER, RecordedEvent(1, 1, "m2", 2)),
        lambda: stores.recording.delete(key, OWNER, "m1"),
        lambda: stores.state.save(key, OWNER, {"s": 2}),
        lambda: stores.state.delete(key, OWNER),
    ):
        with pytest.raises(ErasedError) as erased:
            await call()
        errors.append(erased.value)
    return errors


async def test_record_write_refusals_name_their_key(tmp_path: Path, clock: ManualClock) -> None:
    """A refused token put, recording put or delete, or state save or delete (another
    owner, a fenced epoch, an erased key) carries the key it refused as ``error.key``."""
    async with _open(tmp_path, clock) as stores:
        await stores.recording.put(K, OWNER, RecordedEvent(1, {"t": 1}, "m1", 2))
        await stores.state.save(K, OWNER, {"s": 1}, epoch=2)
        errors = await _refusals(stores, K, clock.now + timedelta(hours=1))
        assert [e.key for e in errors] == [K] * 15
        assert await stores.recording.read(K, OWNER) is None


async def test_a_put_after_a_put_cut_short_at_its_rename_keeps_the_first_token(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A token put crashed after its header named the rename still due: the next put
    (here one that raises the fence, so it writes the header again) finishes that rename
    first, and the first token stays claimable."""
    expires = clock.now + timedelta(hours=1)
    async with _open(tmp_path, clock) as stores:
        _crash_at(stores, "replace", _token_path(stores))
        with pytest.raises(Crash):
            await stores.pause_tokens.put(TOKEN, K, OWNER, {"p": 1}, expires)
        await stores.pause_tokens.put("tok2", K, OWNER, {"p": 2}, expires, epoch=5)
        assert await stores.pause_tokens.claim(TOKEN, K, OWNER) == {"p": 1}
        assert await stores.pause_tokens.claim("tok2", K, OWNER) == {"p": 2}


class GateIO(FileIO):
    """Holds one write at its first new file under ``pause_on`` until ``resume``, and
    notes when a lock has to wait for another holder (``blocked``)."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.pause_on: str | None = None
        self.paused = threading.Event()
        self.resume = threading.Event()
        self.blocked = threading.Event()

    def step(self, what: str, path: str) -> None:
        if what == "create" and self.pause_on is not None and path.startswith(self.pause_on):
            self.pause_on = None
            self.paused.set()
            self.resume.wait(30)

    def lock(self, fd: int, *, exclusive: bool) -> None:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            self.blocked.set()
            super().lock(fd, exclusive=exclusive)


async def _until(done: Callable[[], bool]) -> None:
    for _ in range(2000):
        if done():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("timed out")


async def test_two_puts_of_one_token_on_a_fresh_key_take_turns(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The first put on a key with no directory yet creates it and holds the key's
    exclusive lock for its whole write: a second put of the same token id waits for it,
    then sees the token and is refused, so the token is created once."""
    io = GateIO()
    expires = clock.now + timedelta(hours=1)
    async with FileStores(f"file://{tmp_path / 'store'}", io=io, clock=clock) as stores:
        io.pause_on = os.path.join(stores.root.key_dir(K), "tokens") + os.sep
        try:
            first = asyncio.ensure_future(
                stores.pause_tokens.put(TOKEN, K, OWNER, {"p": "first"}, expires)
            )
            await _until(io.paused.is_set)
            second = asyncio.ensure_future(
                stores.pause_tokens.put(TOKEN, K, OWNER, {"p": "second"}, expires)
            )
            await _until(lambda: second.done() or io.blocked.is_set())
        finally:
            io.resume.set()
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert results[0] is None
        assert isinstance(results[1], ConflictError)
        assert await stores.pause_tokens.claim(TOKEN, K, OWNER) == {"p": "first"}


# --- record files ----------------------------------------------------------------------


async def test_a_record_body_may_span_lines(tmp_path: Path, clock: ManualClock) -> None:
    """A record file is its metadata line, then an opaque JSON body: the split is at the
    first newline, so a body holding newlines (pretty-printed JSON) reads back whole."""
    async with _open(tmp_path, clock) as stores:
        await stores.recording.put(K, OWNER, RecordedEvent(3, {"text": "x"}, "m1", 1))
        path = os.path.join(stores.root.key_dir(K), "recording")
        meta = _read(path).split(b"\n")[0]
        _write(path, meta + b'\n{\n  "text": "partial",\n  "n": [\n    1\n  ]\n}\n')
        event = await stores.recording.read(K, OWNER)
        assert event == RecordedEvent(3, {"text": "partial", "n": [1]}, "m1", 1)


async def test_a_damaged_record_is_reported_corrupt_naming_its_file(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A recording whose metadata line or body does not parse is reported as a corrupt
    store, and the error names the file that is damaged."""
    async with _open(tmp_path, clock) as stores:
        await stores.recording.put(K, OWNER, RecordedEvent(3, {"text": "x"}, "m1", 1))
        path = os.path.join(stores.root.key_dir(K), "recording")
        meta = _read(path).split(b"\n")[0]
        _write(path, b'{"m":\n{"text": "x"}')
        with pytest.raises(BackendUnavailableError, match="corrupt: recording does not parse"):
            await stores.recording.read(K, OWNER)
        _write(path, meta + b'\n{"text":')
        with pytest.raises(BackendUnavailableError, match="corrupt: recording does not parse"):
            await stores.recording.read(K, OWNER)


# --- record encoding -------------------------------------------------------------------

CONTENT = {"text": 'é漢🙂 "q"', "n": [1, 2.5, {"deep": None}], "ok": True}
CANONICAL = json.dumps(CONTENT, ensure_ascii=False, separators=(",", ":")).encode()


async def test_a_branch_copies_each_message_in_the_canonical_encoding(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A branch re-encodes the messages it copies exactly as an append encodes them:
    compact JSON, non-ASCII text as UTF-8, the same bytes on disk as the source's."""
    async with _open(tmp_path, clock) as stores:
        await stores.conversations.append_messages(K, OWNER, [Message("m1", "user", CONTENT)])
        assert b'"c":' + CANONICAL + b',"m":{}}' in _read(
            os.path.join(stores.root.key_dir(K), "msgs.dat")
        )
        branch = await stores.conversations.branch(K, OWNER, "m1", new_session_id="b")
        assert b'"c":' + CANONICAL + b',"m":{}}' in _read(
            os.path.join(stores.root.key_dir(branch), "msgs.dat")
        )
        (copied,) = await stores.conversations.read_messages(branch, OWNER)
        assert copied.content == CONTENT


async def test_a_client_info_record_is_canonical_json_on_disk(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The OAuth client record file holds compact UTF-8 JSON of the record (non-ASCII
    text unescaped), the one encoding every record file of the store uses."""
    async with _open(tmp_path, clock) as stores:
        record = ClientInfo("t", "srv", CONTENT)
        await stores.oauth.save_client_info(record)
        (raw,) = _files_under(os.path.join(stores.root.oauth_root, "c"), ".rec")
        assert (
            raw == json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":")).encode()
        )
        assert await stores.oauth.get_client_info("t", "srv") == record


async def test_a_branch_never_copies_a_nan_from_a_damaged_record(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A damaged source record holding NaN (which no write of the store produces) is
    reported as a corrupt store, by a read and by a branch: the new conversation never
    gets a non-JSON number on disk."""
    async with _open(tmp_path, clock) as stores:
        await stores.conversations.append_messages(K, OWNER, [Message("m1", "user", {"n": 123})])
        data = os.path.join(stores.root.key_dir(K), "msgs.dat")
        _write(data, _read(data).replace(b'"n":123', b'"n":NaN'))
        new_key = ConversationKey(K.tenant, "b")
        with pytest.raises(BackendUnavailableError, match="corrupt"):
            await stores.conversations.read_messages(K, OWNER)
        with pytest.raises(BackendUnavailableError, match="corrupt"):
            await stores.conversations.branch(K, OWNER, "m1", new_session_id="b")
        assert await stores.conversations.read_messages(new_key, OWNER) == []
        assert not any(b"NaN" in raw for raw in _files_under(stores.root.key_dir(new_key)))
