"""Starting and running a turn: claim the lease first, then check the transcript tail.

Checking the tail before claiming leaves a window in which another turn starts and
appends; claiming first closes it (agent servers that check first leave it open).
:class:`Turn` is the whole life of one answer as a context manager: claim, append the
user's message, heartbeat, stream, checkpoint, append the answer, seal, clean up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from ..errors import ErasedError, FencedError, LeaseLostError, StaleWriteError, UsageError
from ..keys import ConversationKey, validate_id
from ..models import JSON, Message, StoredMessage
from ..stores import UNSET, Stores, Unset
from ..stores._base import encode_json
from ..stores.state import MAX_STATE_BYTES
from .lease import DEFAULT_LEASE_CONFIG, ClaimReason, Lease, LeaseConfig, claim

log = logging.getLogger(__name__)

T = TypeVar("T")

STREAM_EVERY = 0.5
"""Default: a turn flushes its streamed text to the recording at most every 0.5 s."""
CHECKPOINT_EVERY = 5.0
"""Default: a turn saves its checkpointed state at most every 5 s."""


async def start_turn(
    stores: Stores,
    key: ConversationKey,
    principal: str,
    message_id: str,
    expected_tail: str | Unset | None,
    *,
    user_message: Message | None = None,
    lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG,
    title: str | None = None,
    expires_at: datetime | None = None,
) -> Lease:
    """Claim the turn ``message_id``, then require the transcript tail to be
    ``expected_tail`` (None: empty or absent conversation; UNSET: no check).

    With ``user_message`` the incoming message is appended under the new epoch,
    conditioned on the same tail, so the user's turn survives a producer crash. A tail
    that already is ``user_message`` (a retried send, or a takeover of this very turn)
    counts as expected: appending it again is a no-op. On a tail mismatch the lease is
    released and :class:`StaleWriteError` raised (:class:`BusyError` comes from the
    claim instead). The heartbeat is not started: use ``async with lease`` or ``lease.run``.

    Raises:
        BusyError: another live turn holds the conversation.
        StaleWriteError: the tail is not ``expected_tail`` (``.tail`` and
            ``.expected`` set); the lease was released.
        ConflictError, ErasedError, NotOwnedError: as for :func:`claim`.
    """
    lease = await claim(stores, key, principal, message_id, lease_config=lease_config)
    try:
        expected: str | Unset | None = expected_tail
        if expected is not UNSET:
            info = await stores.conversations.get_conversation(key, principal)
            tail = info.tail_message_id if info is not None else None
            if user_message is not None and tail == user_message.id:
                expected = tail
            if tail != expected:
                raise StaleWriteError(
                    f"transcript tail is {tail!r}, expected {expected_tail!r}",
                    key=key,
                    tail=tail,
                    expected=expected_tail,
                )
        if user_message is not None:
            await lease.append(
                [user_message],
                create_if_absent=True,
                last_turn_status="running",
                expected_tail=expected,
                title=title,
                expires_at=expires_at,
            )
    except BaseException:
        await asyncio.shield(lease.release())
        raise
    return lease


class _Throttle:
    """Runs ``write`` at most every ``every`` seconds with the latest value offered.

    An offer made too soon is kept and written by a timer when its time comes, so the
    last value never waits for another offer; :meth:`flush` writes what is pending now.
    """

    def __init__(self, every: float, write: Callable[[Any], Awaitable[None]]) -> None:
        self.every = every
        self._write = write
        self._pending: Any = None
        self._has_pending = False
        self._last: float | None = None
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.failure: BaseException | None = None

    async def offer(self, value: Any) -> None:
        if self.failure is not None:
            raise self.failure
        self._pending, self._has_pending = value, True
        now = asyncio.get_running_loop().time()
        if self._last is None or now - self._last >= self.every:
            await self.flush()
        elif self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._later(self._last + self.every - now))

    async def _later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        try:
            await self.flush()
        except Exception as exc:  # surfaced by the next offer or flush
            self.failure = exc

    async def flush(self) -> None:
        async with self._lock:
            if self.failure is not None:
                raise self.failure
            if not self._has_pending:
                return
            value, self._has_pending = self._pending, False
            self._last = asyncio.get_running_loop().time()
            await self._write(value)

    async def cancel(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer is not asyncio.current_task() and not timer.done():
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer


class Turn:
    """One answer's whole life: ``async with conv.turn(message_id, user=...) as turn:``.

    Entering claims the lease (:func:`start_turn`: stale-guarded, the user's message
    appended under the new epoch) and starts the heartbeat. Inside, :meth:`stream` and
    :meth:`checkpoint` are throttled, fenced writes, and every store write this task (or a
    task it starts) makes on the key without an epoch carries the lease's epoch. A clean
    exit flushes what is pending, appends the answer (the streamed text, unless
    :meth:`reply` did), records ``complete`` and seals ``done``; an exception records and
    seals ``errored`` instead. Either way the heartbeat stops and the recording is
    dropped. The sealed row stays as the turn's verdict, so a follower that arrives late
    still learns how it ended; the next claim replaces it. A turn that could not seal
    (its lease lost) deletes nothing another producer holds.

    ``lease`` adopts a lease already claimed (a takeover that judged the claim itself)
    instead of claiming on entry; ``text`` is the answer already recorded, which a
    resumed turn's :meth:`stream` extends. :meth:`abandon` leaves the turn for a standby.
    """

    def __init__(
        self,
        stores: Stores,
        key: ConversationKey,
        principal: str,
        message_id: str,
        *,
        user: Message | None = None,
        expected_tail: str | Unset | None = UNSET,
        stream_every: float = STREAM_EVERY,
        checkpoint_every: float = CHECKPOINT_EVERY,
        lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG,
        title: str | None = None,
        expires_at: datetime | None = None,
        lease: Lease | None = None,
        text: str = "",
    ) -> None:
        validate_id(message_id, "message_id")
        if lease is not None and (lease.key != key or lease.message_id != message_id):
            raise UsageError("an adopted lease must be for this turn's key and message id")
        if not isinstance(text, str):
            raise UsageError(f"text must be a str, got {type(text).__name__}")
        if user is not None and not isinstance(user, Message):
            raise UsageError(f"user must be a Message, got {type(user).__name__}")
        for name, value in (("stream_every", stream_every), ("checkpoint_every", checkpoint_every)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise UsageError(f"{name} must be a non-negative number of seconds")
        self.stores = stores
        self.key = key
        self.principal = principal
        self.message_id = message_id
        self.user = user
        self.expected_tail = expected_tail
        self.lease_config = lease_config
        self.title = title
        self.expires_at = expires_at
        self.text = text
        """The cumulative answer streamed so far (``text`` when resuming a taken-over turn)."""
        self._replied = False
        self._adopted = lease
        self._abandoned = False
        self._lease: Lease | None = None
        self._stream = _Throttle(stream_every, self._record)
        self._checkpoint = _Throttle(checkpoint_every, self._save)

    def __repr__(self) -> str:
        return f"Turn({self.key!r}, message_id={self.message_id!r}, lease={self._lease!r})"

    @property
    def lease(self) -> Lease:
        """The lease this turn holds.

        Raises:
            UsageError: the turn has not been entered.
        """
        if self._lease is None:
            raise UsageError("the turn has not started: use `async with conv.turn(...)`")
        return self._lease

    @property
    def epoch(self) -> int:
        """The lease's epoch: every write of this turn carries it."""
        return self.lease.epoch

    @property
    def lost(self) -> asyncio.Event:
        """Set when the lease is lost (a takeover, a refused heartbeat): stop producing."""
        return self.lease.lost

    @property
    def reason(self) -> ClaimReason:
        """Why the claim succeeded: ``new``, over a ``sealed`` or ``dead`` turn, or ``resume``."""
        return self.lease.reason

    # --- inside the turn -------------------------------------------------------------

    async def stream(self, text: str) -> None:
        """Publish the cumulative answer so far (throttled to ``stream_every``; fenced).

        Raises:
            UsageError: ``text`` is not a string extending what was streamed before.
            LeaseLostError: the lease was lost (the producer must stop).
        """
        if not isinstance(text, str):
            raise UsageError(f"stream takes the cumulative text, got {type(text).__name__}")
        if not text.startswith(self.text):
            raise UsageError("stream takes the cumulative text: it must extend what was streamed")
        self.lease.check()
        self.text = text
        await self._stream.offer(text)

    async def checkpoint(self, state: Mapping[str, JSON]) -> None:
        """Save what a takeover resumes from (throttled to ``checkpoint_every``; fenced).

        The state is copied when offered, so later changes to ``state`` are not saved.

        Raises:
            UsageError: ``state`` is not a JSON mapping, or is over 64 MiB encoded.
            LeaseLostError: the lease was lost (the producer must stop).
        """
        if not isinstance(state, Mapping):
            raise UsageError(f"state must be a mapping, got {type(state).__name__}")
        snapshot = json.loads(encode_json(dict(state), "agent state", MAX_STATE_BYTES))
        self.lease.check()
        await self._checkpoint.offer(snapshot)

    async def reply(
        self, content: JSON = None, *, metadata: Mapping[str, JSON] | None = None
    ) -> StoredMessage | None:
        """Append the answer (``content``, default the streamed text) under this turn's id.

        Returns the stored message (None when it was already there: a retry is a no-op).

        Raises:
            UsageError: a second reply in one turn.
            LeaseLostError: the lease was lost.
        """
        if self._replied:
            raise UsageError("this turn already appended its answer")
        await self._flush()
        answer = Message.assistant(
            self.text if content is None else content, id=self.message_id, metadata=metadata
        )
        stored = await self._fenced(
            self.lease.append([answer], create_if_absent=True, last_turn_status="complete")
        )
        self._replied = True
        return stored[0] if stored else None

    async def _record(self, text: str) -> None:
        await self._fenced(self.lease.record(len(text), {"text": text}))

    async def _save(self, state: dict[str, JSON]) -> None:
        await self._fenced(self.lease.save_state(state))

    async def _fenced(self, write: Awaitable[T]) -> T:
        """Run a lease write; a store's refusal (fenced, erased) is the lease lost."""
        try:
            return await write
        except (FencedError, ErasedError) as exc:
            raise LeaseLostError(
                f"the turn's write was refused ({type(exc).__name__}): the producer must stop",
                key=self.key,
                epoch=self.lease.epoch,
            ) from exc

    async def _flush(self) -> None:
        await self._stream.flush()
        await self._checkpoint.flush()

    async def abandon(self) -> None:
        """Leave the turn for a standby to take over: what a replica shutting down does.

        Writes the pending text, then stops the heartbeat without sealing or dropping
        anything: the row goes dead after ``dead_after`` and a takeover resumes from the
        recording. Leaving the ``async with`` block afterwards (however it ends) writes
        nothing more.
        """
        lease = self.lease
        self._abandoned = True
        with contextlib.suppress(Exception):
            await self._stream.flush()
        await self._stream.cancel()
        await self._checkpoint.cancel()
        await lease.stop_heartbeat()

    # --- the context ---------------------------------------------------------------

    async def __aenter__(self) -> Turn:
        """Claim, append the user's message, start the heartbeat and the ambient epoch."""
        if self._lease is not None:
            raise UsageError("a Turn is entered once")
        if self._adopted is not None:
            self._lease = self._adopted
            await self._adopted.__aenter__()
            return self
        lease = await start_turn(
            self.stores,
            self.key,
            self.principal,
            self.message_id,
            self.expected_tail,
            user_message=self.user,
            lease_config=self.lease_config,
            title=self.title,
            expires_at=self.expires_at,
        )
        self._lease = lease
        await lease.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Finish: ``done`` after a clean block, ``errored`` after an exception."""
        lease = self.lease
        if self._abandoned:
            await lease.__aexit__(None, None, None)  # stops beating; seals nothing
            return
        try:
            if exc is None:
                await self._finish(lease)
            elif not lease.lost.is_set() and lease.status == "held":
                with contextlib.suppress(Exception):
                    await self._checkpoint.flush()
                try:
                    await lease.set_last_turn_status("errored")
                except Exception:
                    log.exception("could not record %r as errored", self)
        finally:
            await self._stream.cancel()
            await self._checkpoint.cancel()
            await lease.__aexit__(exc_type, exc, tb)  # seals errored after an exception
            with contextlib.suppress(Exception):
                await lease.drop_recording()
            if lease.status == "held":  # never sealed: free the conversation at once
                with contextlib.suppress(Exception):
                    await lease.release()

    async def _finish(self, lease: Lease) -> None:
        await self._flush()
        if not self._replied and self.text:
            await self.reply()
        elif not self._replied:
            await lease.set_last_turn_status("complete")
        await lease.seal("done")


__all__ = ["CHECKPOINT_EVERY", "STREAM_EVERY", "Turn", "start_turn"]
