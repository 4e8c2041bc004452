"""The file backend against the in-memory reference: same random calls, same outcomes.

Each seed drives a few hundred random calls (every store, adversarial ids, erasure,
tombstone expiry, truncation, branching) into both backends on one manual clock and
compares every result and every error type. Message ids a branch makes are random on
both sides, so they are compared as "a fresh id".
"""

from __future__ import annotations

import random
import uuid
import warnings
from dataclasses import asdict, is_dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agentstores.keys import ConversationKey
from agentstores.memory.stores import EphemeralStoreWarning, MemoryStores
from agentstores.models import (
    ClientInfo,
    Message,
    PendingAuthorization,
    RecordedEvent,
    SupervisionRow,
    UserIntegration,
)
from agentstores.stores import UNSET, Expired, IdleFor, OverCap, Stores
from agentstores_file.stores import FileStores

from .conftest import ManualClock

TENANTS = ["t1", "t/2"]
SESSIONS = ["s1", "s:2", "../s3", "ß4"]
PRINCIPALS = ["", "alice", "bob"]
MESSAGE_IDS = [f"m{i}" for i in range(8)]
ROLES = ["user", "assistant", "tool", "system", "other"]
TTL = timedelta(seconds=30)


def _key(rng: random.Random) -> ConversationKey:
    return ConversationKey(rng.choice(TENANTS), rng.choice(SESSIONS))


def _principal(rng: random.Random, key: ConversationKey) -> str:
    """Mostly the principal that usually owns ``key``, so writes get far enough to matter."""
    if rng.random() < 0.85:
        return PRINCIPALS[(TENANTS.index(key.tenant) + SESSIONS.index(key.session_id)) % 3]
    return rng.choice(PRINCIPALS)


def _normal(value: Any) -> Any:
    """Comparable form: dataclasses as dicts, branch-made message ids as a marker."""
    if is_dataclass(value) and not isinstance(value, type):
        return _normal(asdict(value))
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_normal(v) for v in value)
    if isinstance(value, str) and len(value) == 32 and value not in MESSAGE_IDS:
        try:
            uuid.UUID(hex=value)
            return "<fresh id>"
        except ValueError:
            return value
    return value


def _op(rng: random.Random, clock: ManualClock) -> tuple[str, Any]:
    """One random call: a name (for failure messages) and an async function of a bundle."""
    key = _key(rng)
    p = _principal(rng, key)
    mid = rng.choice(MESSAGE_IDS)
    epoch = rng.choice([None, None, None, 0, 1, 2, 3])
    kind = rng.randrange(38)
    if kind >= 34:
        kind = rng.choice([12, 22, 26])
    if kind == 0:
        clock.advance(rng.choice([0.001, 0.5, 1, 5, 5, 40]))
        return "tick", None
    if kind in (1, 2):
        row = SupervisionRow(rng.choice(["running", "done", "errored"]), mid, rng.randrange(5))
        expected = rng.choice([None, 0, 1, 2, 3])
        return "sup.cas", lambda s: s.supervision.compare_and_swap(key, p, expected, row)
    if kind == 3:
        return "sup.read", lambda s: s.supervision.read(key, p)
    if kind == 4:
        e = rng.randrange(4)
        return "sup.delete", lambda s: s.supervision.delete(key, p, mid, e)
    if kind in (5, 6):
        event = RecordedEvent(rng.randrange(4), {"text": mid * 3}, mid, rng.randrange(4))
        return "rec.put", lambda s: s.recording.put(key, p, event)
    if kind == 7:
        return "rec.read", lambda s: s.recording.read(key, p)
    if kind == 8:
        return "rec.delete", lambda s: s.recording.delete(key, p, mid, epoch=epoch)
    if kind == 9:
        blob = {"step": rng.randrange(100), "nested": [1, {"a": None}]}
        return "state.save", lambda s: s.state.save(key, p, blob, epoch=epoch)
    if kind == 10:
        return "state.load", lambda s: s.state.load(key, p)
    if kind == 11:
        return "state.delete", lambda s: s.state.delete(key, p, epoch=epoch)
    if kind in (12, 13, 14, 15):
        batch = [
            Message(
                m,
                rng.choice(ROLES),
                rng.choice(["hi", {"n": rng.randrange(9)}, [1, 2.5, "é"], None]),
                metadata=rng.choice([{}, {"k": "v"}]),
                compaction=rng.random() < 0.15,
            )
            for m in rng.sample(MESSAGE_IDS, rng.choice([0, 1, 1, 2, 3]))
        ]
        opts: dict[str, Any] = {
            "create_if_absent": rng.random() < 0.9,
            "last_turn_status": rng.choice([None, "running", "complete"]),
            "epoch": epoch,
            "title": rng.choice([None, "a title"]),
            "expires_at": rng.choice([None, clock.now + timedelta(seconds=rng.randrange(-5, 60))]),
        }
        tail = rng.choice([UNSET] * 8 + [None, *MESSAGE_IDS])
        if tail is not UNSET:
            opts["expected_tail"] = tail
        return "append", lambda s: s.conversations.append_messages(key, p, batch, **opts)
    if kind == 16:
        status = rng.choice(["running", "complete", "errored", "cancelled"])
        return "set_lts", lambda s: s.conversations.set_last_turn_status(
            key, p, status, epoch=epoch
        )
    if kind == 17:
        title = rng.choice([None, "t"])
        return "set_title", lambda s: s.conversations.set_title(key, p, title, epoch=epoch)
    if kind == 18:
        other = rng.choice(PRINCIPALS)
        if rng.random() < 0.7:
            return "share", lambda s: s.conversations.share(key, p, other)
        return "unshare", lambda s: s.conversations.unshare(key, p, other)
    if kind == 19:
        return "truncate", lambda s: s.conversations.truncate(key, p, mid, epoch=epoch)
    if kind == 20:
        new_sid = rng.choice([s for s in SESSIONS if s != key.session_id])
        return "branch", lambda s: s.conversations.branch(key, p, mid, new_session_id=new_sid)
    if kind == 21:
        if rng.random() < 0.5:
            return "delete", lambda s: s.conversations.delete(key, p)
        return "get_conversation", lambda s: s.conversations.get_conversation(key, p)
    if kind in (22, 23):
        speaker = rng.choice(["all", "user", "assistant"])
        limit = rng.choice([None, 1, 2, 5])
        mode = rng.randrange(3)
        if mode == 0:
            index = rng.randrange(-6, 6)
            return "transcript.index", lambda s: s.conversations.get_transcript(
                key, p, index=index, speaker=speaker, limit=limit
            )
        if mode == 1:
            start = clock.now - timedelta(seconds=rng.choice([0, 1, 5, 100]))
            end = start + timedelta(seconds=rng.choice([0, 1, 4, 200]))
            return "transcript.range", lambda s: s.conversations.get_transcript(
                key, p, time_range=(start, end), speaker=speaker, limit=limit
            )
        return "transcript.all", lambda s: s.conversations.get_transcript(
            key, p, speaker=speaker, limit=limit
        )
    if kind == 24:
        n = rng.randrange(0, 5)
        return "recent", lambda s: s.conversations.recent(key, p, n)
    if kind == 25:
        return "history", lambda s: s.conversations.history(key, p)
    if kind == 26:
        start, n = rng.randrange(0, 6), rng.choice([None, 0, 2])
        return "read_messages", lambda s: s.conversations.read_messages(
            key, p, start=start, limit=n
        )
    if kind == 27:
        return "get_conversation", lambda s: s.conversations.get_conversation(key, p)
    if kind == 28:
        tenant, size = rng.choice(TENANTS), rng.choice([1, 2, 50])

        async def listing(s: Stores) -> list[Any]:
            pages, cursor = [], None
            while True:
                page = await s.conversations.list_conversations(
                    tenant, p, limit=size, cursor=cursor
                )
                pages.append(page.items)
                cursor = page.next_cursor
                if cursor is None:
                    return pages

        return "list", listing
    if kind in (29, 30):
        rule = rng.choice(
            [Expired(), IdleFor(timedelta(seconds=rng.choice([1, 30]))), OverCap(rng.randrange(3))]
        )
        if kind == 29:

            async def sweepable(s: Stores) -> list[Any]:
                found = await s.conversations.find_sweepable(rule, limit=1000)
                return sorted((k.tenant, k.session_id) for k in found)

            return "find_sweepable", sweepable
        if rng.random() < 0.5:
            return "erase_if", lambda s: s.conversations.erase_if(key, rule)
        return "history", lambda s: s.conversations.history(key, p)
    if kind == 31:
        token = rng.choice(["k1", "k/2"])
        expires = clock.now + timedelta(seconds=rng.choice([-1, 2, 60]))
        return "token.put", lambda s: s.pause_tokens.put(
            token, key, p, {"resume": token}, expires, epoch=epoch
        )
    if kind == 32:
        token = rng.choice(["k1", "k/2"])
        if rng.random() < 0.7:
            return "token.claim", lambda s: s.pause_tokens.claim(token, key, p)
        return "token.abandon", lambda s: s.pause_tokens.abandon(token, key, p)
    tenant, user, server = rng.choice(TENANTS), rng.choice(PRINCIPALS), rng.choice(["gh", "g/l"])
    state = rng.choice(["st1", "st2"])
    which = rng.randrange(7)
    if which == 0:
        pending = None
        if rng.random() < 0.6:
            pending = PendingAuthorization(
                state, "https://a", "verifier", "https://t", "https://r", clock.now, None
            )
        record = UserIntegration(
            tenant, user, server, pending, rng.choice([None, {"access_token": "x"}])
        )
        return "oauth.save", lambda s: s.oauth.save_user_integration(record)
    if which == 1:
        return "oauth.get", lambda s: s.oauth.get_user_integration(tenant, user, server)
    if which == 2:
        names = rng.choice([None, ["gh"], ["g/l", "gh", "zz"]])
        return "oauth.list", lambda s: s.oauth.list_user_integrations(tenant, user, names)
    if which == 3:
        return "oauth.find", lambda s: s.oauth.find_by_pending_state(state)
    if which == 4:
        return "oauth.delete", lambda s: s.oauth.delete_user_integration(tenant, user, server)
    if which == 5:
        info = ClientInfo(tenant, server, {"client_id": rng.choice(["a", "b"])})
        return "oauth.save_client", lambda s: s.oauth.save_client_info(info)
    servers = rng.choice([None, ["gh"]])
    return "oauth.clients", lambda s: s.oauth.list_client_info(tenant, servers)


async def _outcome(call: Any, bundle: Stores) -> Any:
    try:
        return ("ok", _normal(await call(bundle)))
    except Exception as exc:
        return ("error", type(exc).__name__)


@pytest.mark.parametrize("seed", range(24))
async def test_same_outcomes_as_memory(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    clock = ManualClock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EphemeralStoreWarning)
        memory = MemoryStores(
            f"memory://diff-{uuid.uuid4().hex}", clock=clock, tombstone_ttl=TTL, fresh=True
        )
        await memory.open()
    files = FileStores(
        f"file://{tmp_path}/store", clock=clock, tombstone_ttl=TTL, fsync=False, workers=2
    )
    await files.open()
    history: list[str] = []
    try:
        for _ in range(220):
            name, call = _op(rng, clock)
            history.append(name)
            if call is None:
                continue
            expected = await _outcome(call, memory)
            got = await _outcome(call, files)
            assert got == expected, f"seed {seed}, call #{len(history)} {name}; calls: {history}"
    finally:
        await files.close()
        await memory.close()
