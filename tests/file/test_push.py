"""Push on files: another bundle's or another process's writes wake a follower through
the change check (``agentstores_file.push``), and a key counts as pushed only once its
baseline is taken."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agentstores.errors import UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message, SupervisionRow
from agentstores.protocol import LeaseConfig, follow, start_turn
from agentstores.protocol.follow import FollowEnd, FollowUpdate
from agentstores_file.push import ChangeWatcher
from agentstores_file.stores import FileStores

P = "owner"
FAR = 3600.0
"""Polls this far apart never come within a test: only a wake-up makes a follower read."""
PATIENCE = 10.0
LONG = LeaseConfig(heartbeat_interval=20, dead_after=60)


def _key() -> ConversationKey:
    return ConversationKey(f"t-{uuid.uuid4().hex[:8]}", "s")


async def _eventually(check: Callable[[], bool], within: float = PATIENCE) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "not within the patience"
        await asyncio.sleep(0.01)


def _watcher(stores: FileStores) -> ChangeWatcher:
    assert stores.watcher is not None and stores.wakeups.remote
    return stores.watcher


async def test_two_bundles_on_one_directory_wake_each_others_followers(store_url: str) -> None:
    key = _key()
    async with FileStores(store_url) as producer, FileStores(store_url) as reader:
        lease = await start_turn(
            producer, key, P, "m", None, user_message=Message("u1", "user", "q"), lease_config=LONG
        )
        await lease.record(3, {"text": "abc"})
        events = follow(reader, key, P, poll=FAR, safety_poll=FAR, dead_after=60)
        first = await asyncio.wait_for(anext(events), PATIENCE)
        assert isinstance(first, FollowUpdate) and first.text == "abc"
        await _eventually(lambda: reader.wakeups.pushing(key))
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        await asyncio.sleep(0.1)
        await lease.record(6, {"text": "abcdef"})
        second = await waiting
        assert isinstance(second, FollowUpdate) and second.text == "abcdef"
        changes = _watcher(reader).changes
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        await lease.append(
            [Message("m", "assistant", "abcdef")], expected_tail="u1", last_turn_status="complete"
        )
        await _eventually(lambda: _watcher(reader).changes > changes)
        await asyncio.sleep(0.1)  # the follower has read the append (no update in it)
        # the seal is a heartbeat slot overwritten in place: its bytes change, not its inode
        assert not waiting.done()
        await lease.seal("done")
        end = await waiting
        assert isinstance(end, FollowEnd) and end.verdict == "done"
        await events.aclose()
        await _eventually(lambda: not _watcher(reader).active)  # nobody watches: dropped


_PRODUCER = textwrap.dedent(
    """
    import asyncio, os, sys
    from agentstores.keys import ConversationKey
    from agentstores.models import Message
    from agentstores.protocol import LeaseConfig, start_turn
    from agentstores_file.stores import FileStores

    url, tenant, signals = sys.argv[1], sys.argv[2], sys.argv[3]

    async def wait_for(name):
        while not os.path.exists(os.path.join(signals, name)):
            await asyncio.sleep(0.01)

    async def main():
        async with FileStores(url, push=False) as stores:
            lease = await start_turn(
                stores, ConversationKey(tenant, "s"), "owner", "m", None,
                user_message=Message("u1", "user", "q"),
                lease_config=LeaseConfig(heartbeat_interval=20, dead_after=60),
            )
            await lease.record(3, {"text": "abc"})
            open(os.path.join(signals, "ready"), "w").close()
            await wait_for("more")
            await lease.record(6, {"text": "abcdef"})
            await wait_for("end")
            await lease.append(
                [Message("m", "assistant", "abcdef")], expected_tail="u1",
                last_turn_status="complete",
            )
            await lease.seal("done")

    asyncio.run(main())
    """
)


async def test_another_process_wakes_a_follower(store_url: str, tmp_path: Path) -> None:
    key = _key()
    signals = tmp_path / "signals"
    signals.mkdir()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PRODUCER, store_url, key.tenant, str(signals)
    )
    try:
        async with FileStores(store_url) as reader:
            await _eventually(lambda: (signals / "ready").exists() or child.returncode is not None)
            assert child.returncode is None, "the producer died"
            events = follow(reader, key, P, poll=FAR, safety_poll=FAR, dead_after=60)
            first = await asyncio.wait_for(anext(events), PATIENCE)
            assert isinstance(first, FollowUpdate) and first.text == "abc"
            # The follower waits before the key is pushed, so the wake-up its baseline
            # brings (a read finding nothing new) is spent before the producer writes.
            pending = asyncio.ensure_future(anext(events))
            await _eventually(lambda: reader.wakeups.pushing(key))
            reads = _watcher(reader).changes
            (signals / "more").touch()
            second = await asyncio.wait_for(pending, PATIENCE)
            assert isinstance(second, FollowUpdate) and second.text == "abcdef"
            await _eventually(lambda: _watcher(reader).changes > reads)
            (signals / "end").touch()
            end = await asyncio.wait_for(anext(events), PATIENCE)
            assert isinstance(end, FollowEnd) and end.verdict == "done"
            await events.aclose()
        assert await asyncio.wait_for(child.wait(), PATIENCE) == 0
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


async def test_a_write_before_the_baseline_is_read_once_it_is_taken(store_url: str) -> None:
    """The key is watched after the follower's first read; a write between that read and
    the baseline wakes nothing by itself, and the baseline's wake-up reads it."""
    key = _key()
    async with FileStores(store_url) as producer, FileStores(store_url) as reader:
        watcher = _watcher(reader)
        gate = asyncio.Event()
        subscribe = watcher._subscribe

        async def gated(keys: object) -> None:
            await gate.wait()
            await subscribe(keys)  # type: ignore[arg-type]

        watcher._subscribe = gated  # type: ignore[method-assign]
        lease = await start_turn(
            producer, key, P, "m", None, user_message=Message("u1", "user", "q"), lease_config=LONG
        )
        await lease.record(3, {"text": "abc"})
        events = follow(reader, key, P, poll=FAR, safety_poll=FAR, dead_after=60)
        first = await asyncio.wait_for(anext(events), PATIENCE)
        assert isinstance(first, FollowUpdate) and first.text == "abc"
        assert not reader.wakeups.pushing(key)
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(events), PATIENCE))
        await lease.record(6, {"text": "abcdef"})
        await asyncio.sleep(0.2)
        assert not waiting.done()  # unpushed, with a far poll: nothing reads it yet
        gate.set()
        second = await waiting
        assert isinstance(second, FollowUpdate) and second.text == "abcdef"
        assert reader.wakeups.pushing(key)
        await events.aclose()


async def test_push_off_checks_nothing_and_an_idle_bundle_checks_no_file(store_url: str) -> None:
    for off in (FileStores(store_url, push=False), FileStores(store_url + "?push=off")):
        async with off:
            assert off.watcher is None and not off.wakeups.remote
            with off.wakeups.watch(_key()) as watch:
                assert not watch.pushed
    async with FileStores(store_url + "?push=true") as on:
        watcher = _watcher(on)
        key = _key()
        assert await on.supervision.compare_and_swap(
            key, P, None, SupervisionRow("running", "m", 1)
        )
        await asyncio.sleep(0.2)
        assert watcher.rounds == 0  # nothing watched: the thread sleeps, whatever is written
    assert on.watcher is None and not on.wakeups.remote and watcher._thread is None


@pytest.mark.parametrize(("url", "kw"), [("?push=maybe", {}), ("", {"push": "yes"})])
def test_a_bad_push_option_is_refused(store_url: str, url: str, kw: dict[str, object]) -> None:
    with pytest.raises(UsageError, match="push"):
        FileStores(store_url + url, **kw)  # type: ignore[arg-type]
