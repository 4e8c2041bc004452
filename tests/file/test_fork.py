"""A forked child (a pre-fork server's worker, a ``multiprocessing`` fork) runs its file
calls on threads of its own: the parent's pool is copied into the child without its
threads, and a call handed to it there would wait forever."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores_file import _base
from agentstores_file.stores import FileStores

WAIT = 10.0


async def test_a_forked_child_makes_a_pool_of_its_own(tmp_path: Path) -> None:
    async with FileStores(f"file://{tmp_path / 'store'}", fsync=False) as stores:
        key = ConversationKey("t", "s")
        await stores.conversations.append_messages(key, "p", [Message("m", "user", "hi")])
    parent = _base.shared_pool()
    assert parent.submit(threading.get_ident).result(WAIT)  # a thread of it is idle now
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 3
        try:
            pool = _base.shared_pool()
            ran = pool.submit(threading.get_ident).result(WAIT)
            code = 0 if pool is not parent and ran != threading.get_ident() else 1
        finally:
            os._exit(code)
    _, status = await asyncio.to_thread(os.waitpid, pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's call did not run on a new pool"
    assert _base.shared_pool() is parent  # the parent keeps its own


def test_forgetting_the_pool_makes_the_next_call_start_one() -> None:
    """What the fork hook does, seen in this process: after it, the next call gets a new
    working pool (the one before is left to the parent's threads)."""
    before = _base.shared_pool()
    try:
        _base._forget_shared()
        after = _base.shared_pool()
        assert isinstance(after, ThreadPoolExecutor) and after is not before
        assert after.submit(lambda: 7).result(WAIT) == 7
        after.shutdown()
    finally:
        _base._shared = before
