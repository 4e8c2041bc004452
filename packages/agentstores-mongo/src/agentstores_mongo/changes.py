"""Push: other processes' writes heard through a change stream on the header collection.

Every write a follower cares about (a recorded snapshot, a supervision row swapped or
removed, a heartbeat, messages appended, a transcript cut, an erasure) commits by
updating the key's header document in ``<prefix>keys`` (``header.py``), so one change
stream on that collection hears them all, at commit and never before: the server emits
a change event only for what it committed. Nothing is added to the write.

Each bundle with push on keeps at most one stream (:class:`ChangeListener`), and only
while it follows a key: its pipeline matches ``documentKey._id`` against the watched
keys' header ids on the server, and projects every event down to its resume token,
``operationType`` and ``documentKey``, so the only thing that leaves the server is the
key (never ``fullDocument`` or ``updateDescription``: the recording's body is in the
header). nx-27017 ignores ``$project`` and sends ``fullDocument`` unless asked for
``"off"`` (a value real MongoDB refuses), so it is asked for that.

A new watched key reopens the stream with the new list, resuming after the last event
seen (the resume token), so nothing in between is missed; the key counts as pushed once
the server answered the ``aggregate`` (:class:`KeySubscriptions`). When the stream fails
or is killed (``killCursors``, a lost connection that PyMongo's one automatic resume
could not mend) ``wakeups.remote`` turns False and every watcher is woken, so followers
poll at once; it is reopened with backoff, from the resume token, and every watcher is
woken again once it is open.

Change streams need a replica set or a sharded cluster on real MongoDB (a standalone
server refuses ``$changeStream``); nx-27017 serves them on its own. At open the listener
tries once: a server that refuses turns push off for the bundle, with a log line, and
followers poll (``push=true`` refuses to open instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Set
from typing import Any

from agentstores.keys import ConversationKey
from agentstores.stores.subscriptions import KeySubscriptions
from agentstores.stores.wakeups import Wakeups

from ._base import Context, cancel_requests
from .errors import is_connection_error

log = logging.getLogger(__name__)

PACE = 0.05
"""Seconds between two empty ``getMore``s. Real MongoDB holds an empty ``getMore`` up to
:data:`MAX_AWAIT_MS`, so this only spaces those out; nx-27017 answers at once, so this
is how late a change can be heard there."""
MAX_AWAIT_MS = 1000
"""How long the server may hold an empty ``getMore`` (real MongoDB)."""
STOP_TIMEOUT = 2.0
"""Seconds a stopped reader may take to end (it ends at its next turn regardless)."""
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 5.0
"""Seconds between reopen attempts after a failed stream: doubling from the first to the most."""


class Unsupported(Exception):
    """The server refuses change streams (a standalone MongoDB, a proxy without them)."""


def _projection() -> dict[str, Any]:
    return {"$project": {"documentKey": 1, "operationType": 1}}


async def serves_nx(ctx: Context) -> bool:
    """Whether the server is nx-27017 (its ``buildInfo`` names the process)."""
    try:
        info = await ctx.db.command("buildInfo")
    except Exception:
        return False
    return bool(info.get("process") == "nx_27017")


class ChangeListener(KeySubscriptions):
    """One bundle's change stream on its header collection, matching the watched keys."""

    def __init__(self, ctx: Context, wakeups: Wakeups, pace: float = PACE) -> None:
        super().__init__(wakeups)
        self.ctx = ctx
        self.pace = pace
        self.full_document: str | None = None
        """``"off"`` where the server must be told not to send documents (nx-27017)."""
        self._streamed: dict[str, ConversationKey] = {}
        """The keys the stream should match, by header id."""
        self._stream: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._token: Any = None
        self._backoff = BACKOFF_FIRST
        self.opens = 0
        """How many times a stream was opened (tests read it)."""
        self.heard = 0
        """How many change events arrived."""
        self.strays = 0
        """How many of them named no key the stream is meant to match."""

    # --- lifecycle -------------------------------------------------------------------

    async def probe(self) -> None:
        """Open a stream once and close it: raise :class:`Unsupported` when the server
        refuses change streams (any other failure propagates)."""
        from pymongo.errors import OperationFailure

        if await serves_nx(self.ctx):
            self.full_document = "off"
        try:
            stream = await self._watch([])
        except OperationFailure as exc:  # a refusal; a connection failure propagates
            raise Unsupported(str(exc)) from exc
        with contextlib.suppress(Exception):
            await stream.close()

    def start(self) -> None:
        """Listen from now on (followers of this bundle are pushed once subscribed)."""
        super().start()
        self.wakeups.remote = True

    async def close(self) -> None:
        """Stop listening (idempotent); ``remote`` turns False."""
        self.wakeups.remote = False
        await super().close()
        await self._stop_stream()

    @property
    def cursor_id(self) -> int | None:
        """The open stream's server cursor, if any (tests kill it)."""
        stream = self._stream
        if stream is None:
            return None
        cursor = getattr(stream, "_cursor", None)
        return None if cursor is None else int(cursor.cursor_id)

    # --- KeySubscriptions -----------------------------------------------------------

    async def _subscribe(self, keys: Set[ConversationKey]) -> None:
        self._streamed.update((key.storage_name, key) for key in keys)
        try:
            await self._reopen()
        except Exception:
            self._down()
            raise
        self.wakeups.remote = True

    async def _unsubscribe(self, keys: Set[ConversationKey]) -> None:
        for key in keys:
            self._streamed.pop(key.storage_name, None)
        if not self._streamed:
            await self._stop_stream()  # nothing followed: no stream, no getMore
            self._token = None  # a later subscription wakes its watchers: no replay needed
        # otherwise the stream keeps matching the dropped keys until the next reopen;
        # their events wake nobody

    # --- the stream -------------------------------------------------------------------

    async def _watch(self, names: list[str]) -> Any:
        pipeline = [{"$match": {"documentKey._id": {"$in": names}}}, _projection()]
        stream = await self.ctx.keys.watch(
            pipeline,
            full_document=self.full_document,
            resume_after=self._token,
            max_await_time_ms=MAX_AWAIT_MS,
        )
        if cancel_requests():  # a cancellation the driver swallowed (see _base)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stream.close(), timeout=1.0)
            raise asyncio.CancelledError("cancelled while opening a change stream")
        return stream

    async def _reopen(self) -> None:
        """Replace the stream by one matching every key in :attr:`_streamed`, resuming
        after the last event the old one delivered."""
        await self._stop_stream()
        try:
            stream = await self._watch(sorted(self._streamed))
        except Exception as exc:
            if self._token is None or is_connection_error(exc):
                raise
            # the history after the token is gone (or the token unknown): start now; a
            # watcher woken by the subscription reads whatever changed meanwhile
            log.info("push: cannot resume the change stream (%s); starting anew", exc)
            self._token = None
            stream = await self._watch(sorted(self._streamed))
        self._stream = stream
        self._token = stream.resume_token
        self.opens += 1
        self._reader = asyncio.create_task(self._read(stream), name="agentstores-mongo-changes")

    async def _stop_stream(self) -> None:
        reader, self._reader = self._reader, None
        stream, self._stream = self._stream, None  # the reader stops at its next turn
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
            await asyncio.wait({reader}, timeout=STOP_TIMEOUT)
        if stream is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stream.close(), timeout=1.0)

    async def _read(self, stream: Any) -> None:
        """Wake the watchers of each key a change names, until the stream fails."""
        try:
            while stream.alive and self._stream is stream:
                change = await stream.try_next()
                if cancel_requests():  # a cancellation the driver swallowed (see _base)
                    raise asyncio.CancelledError("cancelled during a getMore")
                self._token = stream.resume_token
                self._backoff = BACKOFF_FIRST
                if change is None:
                    await asyncio.sleep(self.pace)
                    continue
                self.heard += 1
                name = (change.get("documentKey") or {}).get("_id")
                key = self._streamed.get(name) if isinstance(name, str) else None
                if key is None:
                    self.strays += 1
                else:
                    self.wakeups.notify(key)
            reason = "the server closed the change stream"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = f"the change stream failed ({type(exc).__name__}: {exc})"
        if self._stream is not stream:  # replaced meanwhile
            return
        log.info("push: %s; followers poll until it is reopened", reason)
        self._down()
        await asyncio.sleep(self._backoff)
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)
        self.resubscribe()  # the subscriptions task reopens it, with its own backoff

    def _down(self) -> None:
        """The stream is lost: no key is pushed, followers poll again now."""
        self.reset()
        if self.wakeups.remote:
            self.wakeups.remote = False
            for key in self.wakeups.watched():
                self.wakeups.notify(key)


__all__ = ["ChangeListener", "Unsupported", "serves_nx"]
