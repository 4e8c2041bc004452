"""A crash at every step of every kind of write leaves each record old or new.

A ``FileIO`` subclass stops the call dead at its N-th mutating step (write, truncate,
sync, rename, unlink, mkdir) by raising a ``BaseException`` nothing in the backend
catches, which leaves the files exactly as a killed process would (the page cache
survives a SIGKILL; fsync matters only for power loss, which no test here can cause).
For N = 1, 2, ... until the call completes, on a fresh copy of the same starting
directory, the test checks that what every read returns equals either the state before
the call or the state after it, that the store passes the structural check, and that
the next write works.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agentstores.errors import AgentStoresError
from agentstores.keys import ConversationKey
from agentstores.models import (
    Message,
    PendingAuthorization,
    RecordedEvent,
    SupervisionRow,
    Swap,
)
from agentstores.models import UserIntegration as Integration
from agentstores_file.fsio import FileIO, IOStats
from agentstores_file.stores import FileStores

from ._verify import verify_store
from .conftest import ManualClock

K = ConversationKey("tenant/1", "key:1")
K2 = ConversationKey("tenant/1", "branch")
OWNER = "owner"
TTL = timedelta(seconds=10)


class Crash(BaseException):
    """Stops a call at a chosen step, like SIGKILL: no handler in the backend runs."""


class CrashIO(FileIO):
    def __init__(self, at: int, *, fsync: bool = False) -> None:
        super().__init__(fsync=fsync)
        self.at = at
        self.steps = 0
        self.counting = threading.Lock()  # a group commit steps on several threads

    def step(self, what: str, path: str) -> None:
        with self.counting:
            self.steps += 1
            crash = self.steps == self.at
        if crash:
            raise Crash(f"step {self.at}: {what} {path}")


Op = Callable[[FileStores], Awaitable[Any]]


def _msgs(prefix: str, n: int, start: int = 0) -> list[Message]:
    roles = ["user", "assistant", "tool", "assistant", "system"]
    return [
        Message(f"{prefix}{i}", roles[i % 5], {"i": i, "text": "x" * (i % 7)}, compaction=i == 3)
        for i in range(start, start + n)
    ]


async def _observe(stores: FileStores) -> dict[str, Any]:
    """Everything a reader can see of the keys and records the scenarios touch."""
    conv = stores.conversations
    seen: dict[str, Any] = {}
    for key, principal in ((K, OWNER), (K, "other"), (K2, OWNER)):
        fresh_ids = key == K2

        def norm(items: list[Any], fresh_ids: bool = fresh_ids) -> list[Any]:
            out = [asdict(i) for i in items]
            if fresh_ids:
                for row in out:
                    row.pop("id", None)
                    row.pop("message_id", None)
            return out

        info = await conv.get_conversation(key, principal)
        info_dict = asdict(info) if info is not None else None
        if info_dict is not None and fresh_ids:
            info_dict.pop("tail_message_id")
        view = await stores.supervision.read(key, principal)
        recording = await stores.recording.read(key, principal)
        seen[f"{key.session_id}/{principal}"] = {
            "info": info_dict,
            "messages": norm(await conv.read_messages(key, principal)),
            "users": norm(await conv.get_transcript(key, principal, speaker="user")),
            "assistants": norm(await conv.get_transcript(key, principal, speaker="assistant")),
            "history": norm(await conv.history(key, principal)),
            "sup": (view.row, view.fence),
            "state": await stores.state.load(key, principal),
            "recording": recording,
            "listing": [
                (i.key, i.message_count)
                for i in (await conv.list_conversations(K.tenant, principal, limit=100)).items
            ],
        }
    root = stores.root
    kdir = root.key_dir(K)
    head, status = root.head(kdir, K, root.now_us())
    seen["token"] = (
        stores.pause_tokens._token(kdir, head, "tok") if head and status == "live" else None
    )
    oauth = stores.oauth
    seen["oauth"] = (
        await oauth.get_user_integration("t", "user", "srv"),
        await oauth.find_by_pending_state("state-a"),
        await oauth.find_by_pending_state("state-b"),
        await oauth.list_user_integrations("t", "user"),
    )
    return seen


def _pending(state: str, clock: ManualClock) -> PendingAuthorization:
    return PendingAuthorization(
        state, "https://auth", "verifier", "https://tok", "https://cb", clock.now
    )


async def _base(stores: FileStores, clock: ManualClock, n: int = 6) -> None:
    await stores.supervision.compare_and_swap(K, OWNER, None, SupervisionRow("running", "turn", 1))
    await stores.conversations.append_messages(K, OWNER, _msgs("m", n), epoch=1, title="base")


async def _erase_leftovers(stores: FileStores, clock: ManualClock) -> None:
    """K erased, but its data files left behind (a crash right after the tombstone)."""
    await _base(stores, clock)
    await stores.state.save(K, OWNER, {"s": 1})
    root = stores.root
    kdir = root.key_dir(K)
    root.put_head(kdir, {"kc": _key_check(K), "erased_until": 0, "fence": 1})
    clock.advance(1)


async def _base_without_beat_file(stores: FileStores, clock: ManualClock) -> None:
    """K's row claimed with no heartbeat file (as format 1 left it, or a claim cut
    before the file): its first heartbeat creates the file."""
    await _base(stores, clock)
    os.unlink(os.path.join(stores.root.key_dir(K), "beat"))


async def _base_beaten(stores: FileStores, clock: ManualClock) -> None:
    """K with a heartbeat file whose both slots hold beats."""
    await _base(stores, clock)
    for n in range(2):
        clock.advance(0.5)
        row = SupervisionRow("running", f"beat{n}", 1)
        assert await stores.supervision.compare_and_swap(K, OWNER, 1, row)


async def _base_with_token(stores: FileStores, clock: ManualClock) -> None:
    await _base(stores, clock)
    await stores.pause_tokens.put("tok", K, OWNER, {"r": 1}, clock.now + timedelta(hours=1))


def _key_check(key: ConversationKey) -> str:
    from agentstores_file.header import key_check as check

    return check(key)


SCENARIOS: dict[str, tuple[Callable[[FileStores, ManualClock], Awaitable[Any]], Op]] = {
    "append": (
        _base,
        lambda s: s.conversations.append_messages(
            K, OWNER, _msgs("n", 2), last_turn_status="complete", title="t2", epoch=2
        ),
    ),
    "append_grows_id_table": (
        lambda s, c: _base(s, c, 31),
        lambda s: s.conversations.append_messages(K, OWNER, _msgs("g", 3)),
    ),
    "append_creates": (
        lambda s, c: s.supervision.compare_and_swap(
            K, OWNER, None, SupervisionRow("running", "turn", 1)
        ),
        lambda s: s.conversations.append_messages(K, OWNER, _msgs("m", 3)),
    ),
    "truncate": (_base, lambda s: s.conversations.truncate(K, OWNER, "m5", epoch=2)),
    "truncate_user": (_base, lambda s: s.conversations.truncate(K, OWNER, "m0")),
    "branch": (_base, lambda s: s.conversations.branch(K, OWNER, "m3", new_session_id="branch")),
    "erase": (_base, lambda s: s.conversations.delete(K, OWNER)),
    "reuse_after_tombstone": (
        _erase_leftovers,
        lambda s: s.conversations.append_messages(K, "other", _msgs("r", 2)),
    ),
    "cas": (
        _base,
        lambda s: s.supervision.compare_and_swap(K, OWNER, 1, SupervisionRow("running", "t2", 2)),
    ),
    "claim_creates_blank_beat_file": (
        lambda s, c: None,
        lambda s: s.supervision.compare_and_swap(K, OWNER, None, SupervisionRow("running", "t", 1)),
    ),
    "heartbeat_creates_file": (
        _base_without_beat_file,
        lambda s: s.supervision.compare_and_swap(K, OWNER, 1, SupervisionRow("done", "t1", 1)),
    ),
    "heartbeat_in_place": (
        _base_beaten,
        lambda s: s.supervision.compare_and_swap(K, OWNER, 1, SupervisionRow("done", "t3", 1)),
    ),
    "takeover_after_heartbeats": (
        _base_beaten,
        lambda s: s.supervision.compare_and_swap(K, OWNER, 1, SupervisionRow("running", "t", 2)),
    ),
    "erase_after_heartbeats": (_base_beaten, lambda s: s.conversations.delete(K, OWNER)),
    "state_raises_fence": (_base, lambda s: s.state.save(K, OWNER, {"big": "y" * 5000}, epoch=4)),
    "recording": (
        _base,
        lambda s: s.recording.put(K, OWNER, RecordedEvent(3, {"partial": "abc"}, "turn", 2)),
    ),
    "token_put": (
        _base,
        lambda s: s.pause_tokens.put(
            "tok", K, OWNER, {"resume": 1}, s.root.now() + timedelta(hours=1)
        ),
    ),
    "token_claim": (_base_with_token, lambda s: s.pause_tokens.claim("tok", K, OWNER)),
    "share": (_base, lambda s: s.conversations.share(K, OWNER, "other")),
    "oauth_save": (
        lambda s, c: s.oauth.save_user_integration(
            Integration("t", "user", "srv", _pending("state-a", c))
        ),
        lambda s: s.oauth.save_user_integration(
            Integration("t", "user", "srv", _pending("state-b", ManualClock()), {"token": "z"})
        ),
    ),
    "oauth_delete": (
        lambda s, c: s.oauth.save_user_integration(
            Integration("t", "user", "srv", _pending("state-a", c))
        ),
        lambda s: s.oauth.delete_user_integration("t", "user", "srv"),
    ),
}


async def _run_setup(setup: Any, stores: FileStores, clock: ManualClock) -> None:
    result = setup(stores, clock)
    if hasattr(result, "__await__"):
        await result


FOLLOW_UPS = ("append", "state", "recording", "token", "forget")
"""Which store writes first after a crash (``forget``, a state delete, only ever first)."""


def _redo_left(path: str) -> bool:
    """Whether a key header under ``path`` names renames left to redo."""
    for head in Path(path).glob("keys/*/*/head"):
        if json.loads(head.read_bytes()).get("redo"):
            return True
    return False


def _rename_pending(path: str) -> bool:
    """Whether a key header under ``path`` names a rename whose source is still there
    (a header keeps the renames it named until its next change: done ones are skipped)."""
    for head in Path(path).glob("keys/*/*/head"):
        for src, _ in json.loads(head.read_bytes()).get("redo") or ():
            if (head.parent / src).exists():
                return True
    return False


async def _forget_state(stores: FileStores, owner: str) -> None:
    """Delete the state, and check it is gone (before the state write that follows)."""
    await stores.state.delete(K, owner)
    assert await stores.state.load(K, owner) == {}, "a deleted state is still read"


async def _follow_up(stores: FileStores, first: str, at: int, clock: ManualClock) -> None:
    """Write every store once after a crash, ``first`` first, and read the writes back."""
    info = await stores.conversations.get_conversation(K, "other")
    owner = info.owner if info is not None else OWNER
    writes = {
        "append": lambda: stores.conversations.append_messages(
            K, OWNER, [Message("next", "user", 1)]
        ),
        "state": lambda: stores.state.save(K, owner, {"after": at}),
        "recording": lambda: stores.recording.put(K, owner, RecordedEvent(9, "late", "late", 9)),
        "token": lambda: stores.pause_tokens.put(
            "tok2", K, owner, 1, clock.now + timedelta(hours=1), epoch=9
        ),
        "forget": lambda: _forget_state(stores, owner),
    }
    refused: set[str] = set()
    for name in (first, *(n for n in FOLLOW_UPS if n not in (first, "forget"))):
        try:
            await writes[name]()
        except AgentStoresError:  # a key the crashed call left to another owner, erased
            refused.add(name)
    if "state" not in refused:
        assert await stores.state.load(K, owner) == {"after": at}, f"{first} first"
    if "recording" not in refused:
        recorded = await stores.recording.read(K, owner)
        assert recorded is not None and recorded.message_id == "late", f"{first} first"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_crash_at_every_step_leaves_old_or_new(name: str, tmp_path: Path) -> None:
    setup, op = SCENARIOS[name]
    clock = ManualClock()
    base = str(tmp_path / "base")

    def bundle(path: str, io: FileIO | None = None) -> FileStores:
        return FileStores(f"file://{path}", clock=clock, tombstone_ttl=TTL, fsync=False, io=io)

    async with bundle(base) as stores:
        await _run_setup(setup, stores, clock)
    clock.advance(TTL.total_seconds() if name == "reuse_after_tombstone" else 0.5)

    async def observe(path: str) -> dict[str, Any]:
        async with bundle(path) as stores:
            return await _observe(stores)

    before = await observe(base)
    done = str(tmp_path / "done")
    shutil.copytree(base, done)
    async with bundle(done) as stores:
        await op(stores)
    after = await observe(done)
    assert after != before, "the scenario's call changed nothing visible"

    at, outcomes = 0, set()
    while True:
        at += 1
        trial = str(tmp_path / f"trial{at}")
        shutil.copytree(base, trial)
        io = CrashIO(at)
        completed = False
        async with bundle(trial, io) as stores:
            try:
                await op(stores)
                completed = True
            except Crash:
                pass
        state = await observe(trial)
        assert state in (before, after), f"{name}: crash at step {at} left a mixed state"
        outcomes.add("new" if state == after else "old")
        verify_store(trial)
        # Later writes win over any rename a crash left to redo, whichever store writes
        # first after the crash (each finishes the redo itself): after a crash that left
        # a redo, each store in turn writes first (on a copy); after any other, one does.
        firsts = FOLLOW_UPS if _redo_left(trial) else FOLLOW_UPS[at % len(FOLLOW_UPS) :][:1]
        for first in firsts:
            again = f"{trial}-{first}"
            shutil.copytree(trial, again)
            async with bundle(again) as stores:
                await _follow_up(stores, first, at, clock)
            verify_store(again)
            shutil.rmtree(again)
        shutil.rmtree(trial)
        if completed:
            break
        assert at < 200
    assert outcomes == {"old", "new"}, outcomes


BATCH_KEYS = [ConversationKey("tenant/1", f"batch{i}") for i in range(6)]


@pytest.mark.parametrize("fsync", [False, True])
async def test_crash_in_a_batch_leaves_each_row_old_or_new(fsync: bool, tmp_path: Path) -> None:
    """A group commit crashed at any step (its rows' fsyncs, renames and directory syncs
    run on several threads) leaves every row old or new, each on its own: rows of one
    batch are not atomic together, but none is ever torn or half-written. The batch
    mixes takeovers (header replaces), a claim, a loser, a key's first heartbeat (its
    heartbeat file is created) and a heartbeat written in place."""
    clock = ManualClock()
    base = str(tmp_path / "base")
    existing, fresh, loser = BATCH_KEYS[:2], BATCH_KEYS[2], BATCH_KEYS[3]
    first_beat, in_place = BATCH_KEYS[4], BATCH_KEYS[5]

    def bundle(path: str, io: FileIO | None = None) -> FileStores:
        return FileStores(f"file://{path}", clock=clock, fsync=fsync, io=io)

    async with bundle(base) as stores:
        for key in [*existing, loser, first_beat, in_place]:
            ok = await stores.supervision.compare_and_swap(
                key, OWNER, None, SupervisionRow("running", "turn", 1)
            )
            assert ok
        for n in range(2):
            row = SupervisionRow("running", f"beat{n}", 1)
            assert await stores.supervision.compare_and_swap(in_place, OWNER, 1, row)
        os.unlink(os.path.join(stores.root.key_dir(first_beat), "beat"))
    clock.advance(0.5)
    batch = [Swap(k, OWNER, 1, SupervisionRow("running", "t2", 2)) for k in existing]
    batch.append(Swap(fresh, OWNER, None, SupervisionRow("running", "t1", 1)))
    batch.append(Swap(loser, OWNER, 7, SupervisionRow("running", "t9", 9)))
    batch += [Swap(k, OWNER, 1, SupervisionRow("done", "t3", 1)) for k in (first_beat, in_place)]

    async def rows(path: str) -> dict[str, Any]:
        async with bundle(path) as stores:
            return {k.session_id: await stores.supervision.read(k, OWNER) for k in BATCH_KEYS}

    before = await rows(base)
    done = str(tmp_path / "done")
    shutil.copytree(base, done)
    async with bundle(done) as stores:
        outcomes = await stores.supervision.compare_and_swap_many(batch)
    assert [o.swapped for o in outcomes] == [True, True, True, False, True, True]
    after = await rows(done)

    at, seen = 0, set()
    while True:
        at += 1
        trial = str(tmp_path / f"trial{at}")
        shutil.copytree(base, trial)
        completed = False
        async with bundle(trial, CrashIO(at, fsync=fsync)) as stores:
            try:
                await stores.supervision.compare_and_swap_many(batch)
                completed = True
            except Crash:
                pass
        state = await rows(trial)
        for name, row in state.items():
            assert row in (before[name], after[name]), f"crash at step {at} tore {name}"
            seen.add((name, "new" if row == after[name] else "old"))
        verify_store(trial)
        async with bundle(trial) as stores:  # the next batch works on what the crash left
            again = await stores.supervision.compare_and_swap_many(
                [Swap(k, OWNER, None, SupervisionRow("running", "x", 5)) for k in BATCH_KEYS]
            )
            assert all(o.error is None for o in again)
        verify_store(trial)
        shutil.rmtree(trial)
        if completed:
            break
        assert at < 200
    for key in [*existing, fresh, first_beat, in_place]:
        assert {(key.session_id, "old"), (key.session_id, "new")} <= seen


async def test_finishing_a_crashed_writers_renames_is_counted(tmp_path: Path) -> None:
    """The renames a crash left to redo, finished by the next writer of the key (here a
    state save after a recording's crash), are counted like its own
    (``IOStats.replaces``), and made durable (its folder synced): the I/O counts say
    what a write after a crash cost."""

    async def recording(stores: FileStores, n: int) -> None:
        """At epoch ``n``: a put that raises the fence changes the header, so its
        file is renamed through the header's redo list."""
        await stores.recording.put(K, OWNER, RecordedEvent(n, {"n": n}, f"m{n}", n))

    base = str(tmp_path / "base")
    async with FileStores(f"file://{base}", fsync=False) as stores:
        await recording(stores, 1)
    for at in range(1, 50):
        trial = str(tmp_path / f"trial{at}")
        shutil.copytree(base, trial)
        async with FileStores(f"file://{trial}", io=CrashIO(at)) as stores:
            with contextlib.suppress(Crash):
                await recording(stores, 2)
        if _rename_pending(trial):
            break
    else:
        raise AssertionError("no crash point of a recording left a rename to redo")
    counts = {}
    for name, path in (("clean", base), ("after the crash", trial)):
        stats = IOStats()
        async with FileStores(f"file://{path}", io_stats=stats) as stores:
            await stores.state.save(K, OWNER, {"next": 1})  # finishes the recording's
        counts[name] = stats.snapshot()
    clean, after = counts["clean"], counts["after the crash"]
    assert after["replaces"] == clean["replaces"] + 1, counts
    assert after["syncs"] == clean["syncs"] + 1, "the finished rename's folder is synced"
