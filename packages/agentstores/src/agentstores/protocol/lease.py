"""The turn lease: who produces a conversation's answer, decided on the store's clock.

A lease is one supervision row (``running``, ``message_id``, ``epoch``). Claiming takes
an epoch above everything the key has seen, which fences every store at once: a
producer that was only paused, not dead, has each later write refused and stops.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextvars import Token
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar

from ..errors import (
    AgentStoresError,
    BackendUnavailableError,
    BusyError,
    ConflictError,
    ErasedError,
    FencedError,
    HeartbeatTimeoutError,
    LeaseLostError,
    UsageError,
)
from ..keys import ConversationKey, validate_id
from ..models import (
    JSON,
    LastTurnStatus,
    Message,
    RecordedEvent,
    StoredMessage,
    SupervisionRow,
    SupervisionView,
    Swap,
    SwapOutcome,
)
from ..stores import UNSET, Stores, Unset
from ..stores.ambient import enter_epoch, fenced_as, leave_epoch
from .heartbeats import coalescer_for
from .ticker import ticker_for

log = logging.getLogger(__name__)

T = TypeVar("T")

Liveness = Literal["absent", "sealed", "live", "dead"]
ClaimReason = Literal["new", "sealed", "dead", "resume"]
LeaseStatus = Literal["held", "lost", "sealed", "released"]


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """Timings of a lease (seconds). Defaults: beat every 1 s, dead after 3 s without one.

    ``heartbeat_timeout`` bounds one heartbeat write (default: ``dead_after``): a beat
    slower than that may already have let another producer take over.
    ``claim_attempts`` bounds how often a lost compare-and-swap race is re-decided.
    ``write_attempts`` bounds how often a producer write whose outcome is unknown, or
    that never reached the backend, is retried (every lease write is idempotent).
    ``coalesce`` sends heartbeats through the process's per-store batch
    (:mod:`agentstores.protocol.heartbeats`) rather than one call each.
    ``on_beat(due, sent, answered)`` is called after each beat of the running heartbeat
    that the store accepted, with the loop-clock times it was due, handed to the store
    and answered: the heartbeat's lag, for monitoring (and the capacity bench).
    """

    dead_after: float = 3.0
    heartbeat_interval: float = 1.0
    heartbeat_timeout: float | None = None
    claim_attempts: int = 5
    write_attempts: int = 3
    coalesce: bool = True
    on_beat: Callable[[float, float, float], object] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.heartbeat_interval > 0:
            raise UsageError("heartbeat_interval must be positive")
        if not self.dead_after > self.heartbeat_interval:
            raise UsageError("dead_after must be longer than heartbeat_interval")
        if self.heartbeat_timeout is not None and not self.heartbeat_timeout > 0:
            raise UsageError("heartbeat_timeout must be positive")
        if self.write_attempts < 1:
            raise UsageError("write_attempts must be at least 1")
        if self.claim_attempts < 1:
            raise UsageError("claim_attempts must be at least 1")

    @property
    def beat_timeout(self) -> float:
        """How long one heartbeat write may take before the lease counts as lost."""
        return self.heartbeat_timeout if self.heartbeat_timeout is not None else self.dead_after


DEFAULT_LEASE_CONFIG = LeaseConfig()


def lost_error(reason: BaseException | None) -> type[LeaseLostError]:
    """The error a lease lost for ``reason`` raises: :class:`LeaseLostError` when the
    store refused it (fenced, erased), :class:`HeartbeatTimeoutError` when a heartbeat
    could not be confirmed (it timed out, or the store failed it)."""
    refused = isinstance(reason, AgentStoresError) and not isinstance(
        reason, BackendUnavailableError
    )
    return LeaseLostError if refused else HeartbeatTimeoutError


def heartbeat_age(row: SupervisionRow, now: datetime) -> float | None:
    """Seconds between the row's heartbeat and ``now`` (both store clock)."""
    if row.heartbeat_at is None:
        return None
    return (now - row.heartbeat_at).total_seconds()


def liveness(
    view: SupervisionView, dead_after: float = DEFAULT_LEASE_CONFIG.dead_after
) -> Liveness:
    """Judge a supervision read: only the store's clock is compared with itself."""
    row = view.row
    if row is None:
        return "absent"
    if row.status != "running":
        return "sealed"
    age = heartbeat_age(row, view.now)
    if age is None or age > dead_after:
        return "dead"
    return "live"


class Lease:
    """A held turn. Producer writes go through it so each carries the lease's epoch.

    Start the heartbeat with ``async with lease:``, :meth:`run` or
    :meth:`start_heartbeat`. When a heartbeat is refused or raises, or a store refuses
    a write as fenced, the lease becomes lost: :attr:`lost` is set, bound tasks are
    cancelled, ``on_lost`` callbacks run, and every later helper call raises
    :class:`LeaseLostError` without touching the store.
    """

    def __init__(
        self,
        stores: Stores,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int,
        *,
        lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG,
        reason: ClaimReason = "new",
        previous: SupervisionRow | None = None,
        previous_age: float | None = None,
    ) -> None:
        self.stores = stores
        self.key = key
        self.principal = principal
        self.message_id = message_id
        self.epoch = epoch
        self.config = lease_config
        self.reason: ClaimReason = reason
        """Why the claim succeeded: a new row, over a sealed or dead row, or a resume."""
        self.previous = previous
        """The row this lease replaced, if any."""
        self.previous_age = previous_age
        """Store-clock age of the replaced row's heartbeat when it was judged."""
        self.status: LeaseStatus = "held"
        self.lost = asyncio.Event()
        self.lost_reason: BaseException | None = None
        self.heartbeats = 0
        self._heartbeat: _Heartbeat | None = None
        self._bound: list[asyncio.Future[Any]] = []
        self._callbacks: list[Callable[[BaseException], object]] = []
        self._ambient: list[Token[Mapping[ConversationKey, int]]] = []

    def __repr__(self) -> str:
        return (
            f"Lease({self.key!r}, message_id={self.message_id!r}, epoch={self.epoch}, "
            f"status={self.status!r})"
        )

    # --- losing the lease -----------------------------------------------------------

    def bind(self, task: asyncio.Future[Any]) -> None:
        """Cancel ``task`` when the lease is lost (immediately if it already is)."""
        if self.lost.is_set():
            task.cancel()
        else:
            self._bound.append(task)

    def on_lost(self, callback: Callable[[BaseException], object]) -> None:
        """Call ``callback(reason)`` once when the lease is lost."""
        if self.lost.is_set() and self.lost_reason is not None:
            callback(self.lost_reason)
        else:
            self._callbacks.append(callback)

    def mark_lost(self, reason: BaseException) -> None:
        """End the lease: set :attr:`lost`, cancel bound tasks (not the caller), notify."""
        if self.lost.is_set():
            return
        self.status = "lost"
        self.lost_reason = reason
        self.lost.set()
        log.warning(
            "lease on %r (message %r, epoch %d) lost: %r",
            self.key,
            self.message_id,
            self.epoch,
            reason,
        )
        current = asyncio.current_task()
        for task in self._bound:
            if task is not current and not task.done():
                task.cancel()
        if self._heartbeat is not None:
            self._heartbeat.halt()
        for callback in self._callbacks:
            try:
                callback(reason)
            except Exception:
                log.exception("on_lost callback failed")

    def check(self) -> None:
        """Return if the lease is still held.

        Raises:
            LeaseLostError: the lease is lost, sealed or released.
        """
        if self.lost.is_set():
            raise lost_error(self.lost_reason)(
                "the lease was lost; the producer must stop",
                key=self.key,
                epoch=self.epoch,
                message_id=self.message_id,
            ) from self.lost_reason
        if self.status != "held":
            raise LeaseLostError(f"the lease is {self.status}", key=self.key, epoch=self.epoch)

    async def _write(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run one fenced store call; a refusal (fenced or erased) ends the lease.

        Every write the lease makes is idempotent (same blob, same snapshot, message ids
        already present, same row), so a call whose outcome is unknown (the connection
        broke after sending) or that never reached the backend is retried a few times
        within ``dead_after``: the retry settles the outcome either way.
        """
        attempts = self.config.write_attempts
        for attempt in range(1, attempts + 1):
            self.check()
            try:
                return await call()
            except (FencedError, ErasedError) as exc:
                self.mark_lost(exc)
                raise
            except BackendUnavailableError as exc:
                if attempt == attempts:
                    raise
                log.warning(
                    "lease on %r: write attempt %d failed (%s); retrying", self.key, attempt, exc
                )
                await asyncio.sleep(self.config.dead_after / (2 * attempts))
        raise AssertionError("unreachable")

    # --- heartbeat ------------------------------------------------------------------

    async def heartbeat_once(self) -> None:
        """Stamp a fresh ``running`` row under the lease's epoch.

        Raises:
            LeaseLostError: the lease was already lost, or this beat was refused, failed or
                timed out (the lease is then lost).
        """
        self.check()
        row = SupervisionRow("running", self.message_id, self.epoch)
        try:
            async with asyncio.timeout(self.config.beat_timeout):
                if self.config.coalesce:
                    swap = Swap(self.key, self.principal, self.epoch, row)
                    outcome = await coalescer_for(self.stores.supervision).beat(swap)
                    ok = outcome.result()
                else:
                    ok = await self.stores.supervision.compare_and_swap(
                        self.key, self.principal, self.epoch, row
                    )
        except Exception as exc:
            if isinstance(exc, TimeoutError):
                exc = TimeoutError(f"heartbeat took longer than {self.config.beat_timeout}s")
            self.mark_lost(exc)
            raise lost_error(exc)("heartbeat failed", key=self.key, epoch=self.epoch) from exc
        if not ok:
            refused = FencedError(
                "heartbeat refused: the supervision row moved on",
                key=self.key,
                epoch=self.epoch,
            )
            self.mark_lost(refused)
            raise LeaseLostError("heartbeat refused", key=self.key, epoch=self.epoch) from refused
        self.heartbeats += 1

    def start_heartbeat(self) -> asyncio.Future[None]:
        """Start beating every ``heartbeat_interval`` (idempotent).

        The beats are filed on the loop's :class:`~agentstores.protocol.ticker.HeartbeatTicker`
        and sent through the store's coalescer (no task per lease). The first comes at a
        random point of the first interval, so leases claimed together spread their beats
        over the interval; later ones keep that phase.

        Returns:
            A future done once the heartbeat stops (stopped, or the lease lost).

        Raises:
            LeaseLostError: the lease is no longer held.
        """
        self.check()
        if self._heartbeat is None or self._heartbeat.stopped.done():
            self._heartbeat = _Heartbeat(self, asyncio.get_running_loop())
        return self._heartbeat.stopped

    async def stop_heartbeat(self) -> None:
        """Stop the heartbeat, if one runs (idempotent; never raises but a cancellation).

        A beat not yet sent is withdrawn; one already sent is waited for (until it is
        answered or times out), so a seal written next cannot be undone by a late beat.
        """
        beating, self._heartbeat = self._heartbeat, None
        if beating is None:
            return
        beating.halt()
        await beating.idle()

    # --- the producer's writes, each carrying the epoch ------------------------------

    async def save_state(self, state: Mapping[str, JSON]) -> None:
        """Checkpoint the agent's state (what a takeover resumes from), fenced.

        Raises:
            LeaseLostError: the lease was already lost, sealed or released, or this write was
                refused as fenced or erased (the lease is then lost).
            BackendUnavailableError: the store stayed unreachable through every retry.
        """
        await self._write(
            lambda: self.stores.state.save(self.key, self.principal, state, epoch=self.epoch)
        )

    async def record(self, index: int, message: JSON) -> bool:
        """Publish the cumulative answer so far, fenced; False if a newer index is stored.

        Raises:
            LeaseLostError: the lease was already lost, sealed or released, or this write was
                refused as fenced or erased (the lease is then lost).
            BackendUnavailableError: the store stayed unreachable through every retry.
        """
        event = RecordedEvent(index, message, self.message_id, self.epoch)
        return await self._write(lambda: self.stores.recording.put(self.key, self.principal, event))

    async def append(
        self,
        messages: Sequence[Message],
        *,
        create_if_absent: bool = False,
        last_turn_status: LastTurnStatus | None = None,
        expected_tail: str | Unset | None = UNSET,
        title: str | None = None,
        expires_at: datetime | None = None,
    ) -> list[StoredMessage]:
        """Append to the transcript under the lease's epoch (see ``append_messages``).

        Raises:
            LeaseLostError: the lease was already lost, sealed or released, or this write was
                refused as fenced or erased (the lease is then lost).
            BackendUnavailableError: the store stayed unreachable through every retry.
            StaleWriteError: the tail is not ``expected_tail``.
        """
        return await self._write(
            lambda: self.stores.conversations.append_messages(
                self.key,
                self.principal,
                messages,
                create_if_absent=create_if_absent,
                last_turn_status=last_turn_status,
                expected_tail=expected_tail,
                epoch=self.epoch,
                title=title,
                expires_at=expires_at,
            )
        )

    async def set_last_turn_status(self, status: LastTurnStatus) -> None:
        """Record how the turn ended in the conversation's metadata, fenced.

        Raises:
            LeaseLostError: the lease was already lost, sealed or released, or this write was
                refused as fenced or erased (the lease is then lost).
            BackendUnavailableError: the store stayed unreachable through every retry.
        """
        await self._write(
            lambda: self.stores.conversations.set_last_turn_status(
                self.key, self.principal, status, epoch=self.epoch
            )
        )

    # --- ending the turn ---------------------------------------------------------

    async def seal(self, status: Literal["done", "errored"] = "done") -> None:
        """Mark the turn finished: followers then read the transcript, not the recording.

        Raises:
            UsageError: ``status`` is neither ``done`` nor ``errored``.
            LeaseLostError: the lease is no longer held, or the row moved on.
        """
        if status not in ("done", "errored"):
            raise UsageError(f"seal status must be done or errored, got {status!r}")
        await self.stop_heartbeat()
        self.check()
        row = SupervisionRow(status, self.message_id, self.epoch)
        ok = await self._write(
            lambda: self.stores.supervision.compare_and_swap(
                self.key, self.principal, self.epoch, row
            )
        )
        if not ok:
            refused = FencedError(
                "seal refused: the supervision row moved on", key=self.key, epoch=self.epoch
            )
            self.mark_lost(refused)
            raise LeaseLostError("seal refused", key=self.key, epoch=self.epoch) from refused
        self.status = "sealed"

    async def drop_recording(self) -> bool:
        """Delete this turn's recording unless a newer lease now owns it (guarded, fenced).

        Returns:
            True if this call deleted it; False when absent, another turn's, or fenced.
        """
        try:
            return await self.stores.recording.delete(
                self.key, self.principal, self.message_id, epoch=self.epoch
            )
        except FencedError:
            return False

    async def release(self) -> bool:
        """Give the turn up: delete the row iff it still holds this message and epoch.

        The key's fence stays, so the next lease still starts above this one.

        Returns:
            True if the row was deleted.
        """
        await self.stop_heartbeat()
        deleted = False
        if self.status in ("held", "sealed"):
            deleted = await self.stores.supervision.delete(
                self.key, self.principal, self.message_id, self.epoch
            )
        if self.status == "held":
            self.status = "released"
        return deleted

    async def run(self, producer: Coroutine[Any, Any, T]) -> T:
        """Run ``producer`` under the heartbeat and return its result.

        The heartbeat stops when the producer ends, however it ends, so a cancelled producer
        cannot leave a lease beating forever; seal within ``dead_after``.

        Raises:
            LeaseLostError: the lease was lost meanwhile (the producer was cancelled).
        """
        with fenced_as(self.key, self.epoch):
            # The producer's task copies this context: its store writes carry the epoch.
            task: asyncio.Task[T] = asyncio.ensure_future(producer)
        self.bind(task)
        self.start_heartbeat()
        try:
            return await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self.lost.is_set() and (me is None or me.cancelling() == 0):
                raise lost_error(self.lost_reason)(
                    "the producer was stopped: lease lost", key=self.key, epoch=self.epoch
                ) from self.lost_reason
            raise
        finally:
            if task in self._bound:
                self._bound.remove(task)
            if not task.done():
                task.cancel()
            await self.stop_heartbeat()

    async def __aenter__(self) -> Lease:
        """Start beating; until exit, this task's writes on the key carry the epoch."""
        self.start_heartbeat()
        self._ambient.append(enter_epoch(self.key, self.epoch))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop beating; a turn that raised while the lease was held is sealed ``errored``."""
        if self._ambient:
            leave_epoch(self._ambient.pop())
        await self.stop_heartbeat()
        if exc is not None and self.status == "held" and not self.lost.is_set():
            try:
                await self.seal("errored")
            except Exception:
                log.exception("could not seal %r as errored", self)


class _Heartbeat:
    """A lease's running heartbeat: one beat per interval, filed on the loop's ticker.

    It is its own beat: each interval the same object (same swap) is handed to the
    store's coalescer, or with ``coalesce=False`` sent as one call in its own task, and
    the outcome comes back to :meth:`resolve`. Accepted counts it; refused, failed, or
    unanswered within ``beat_timeout`` ends the lease. At most one beat is out at a time:
    one falling due while the last is still out is sent as soon as that one is answered.
    The next beat is due one interval after the last was due, so a slow answer does not
    slow the rhythm. Nothing is allocated per beat on this side.
    """

    __slots__ = (
        "_idle",
        "batch",
        "coalescer",
        "config",
        "deadline",
        "every",
        "lease",
        "loop",
        "out",
        "owed",
        "sent_at",
        "settled",
        "stopped",
        "swap",
        "task",
        "ticker",
        "timeout",
    )

    def __init__(self, lease: Lease, loop: asyncio.AbstractEventLoop) -> None:
        self.lease = lease
        self.config = config = lease.config
        self.loop = loop
        self.stopped: asyncio.Future[None] = loop.create_future()
        self.ticker = ticker = ticker_for(loop)
        row = SupervisionRow("running", lease.message_id, lease.epoch)
        self.swap = Swap(lease.key, lease.principal, lease.epoch, row)
        """The same swap every beat (the store stamps the time)."""
        self.coalescer = coalescer_for(lease.stores.supervision) if config.coalesce else None
        self.every = ticker.slots(config.heartbeat_interval)
        self.timeout = max(1, math.ceil(config.beat_timeout / ticker.resolution - 1e-9))
        """Slots a beat may stay unanswered (rounded up: never sooner than asked)."""
        self.out = False
        """A beat is out (handed over, not yet answered)."""
        self.deadline = 0
        """The slot at which the beat out counts as timed out."""
        self.owed: int | None = None
        """The slot a beat fell due in while the last was still out."""
        self.sent_at = (0.0, 0.0)
        """(due, sent) loop times of the beat out, for ``on_beat``."""
        self.batch: asyncio.Task[None] | None = None
        self.settled = True
        self.task: asyncio.Task[bool] | None = None
        self._idle: asyncio.Future[None] | None = None
        first = loop.time() + config.heartbeat_interval * (1.0 - random.random())
        ticker.at(ticker.slot_of(first), self)

    def tick(self, slot: int) -> None:
        """A beat falls due (the ticker calls this)."""
        if self.stopped.done():
            return
        self.ticker.at(slot + self.every, self)
        if not self.out:
            self._send(slot)
        elif slot >= self.deadline:
            self._end(None, TimeoutError())
        else:
            self.owed = slot
            if self.deadline < slot + self.every:  # it times out before the next tick
                self.ticker.at(self.deadline, _Expiry(self))

    def _send(self, slot: int, now: int | None = None) -> None:
        """Hand over the beat due at ``slot`` (sent at slot ``now``, when that is later)."""
        self.out = True
        self.deadline = (slot if now is None else max(slot, now)) + self.timeout
        if self.timeout < self.every:  # a timeout shorter than the interval: its own tick
            self.ticker.at(self.deadline, _Expiry(self))
        if self.config.on_beat is not None:
            self.sent_at = (self.ticker.time_of(slot), self.loop.time())
        if self.coalescer is not None:
            self.coalescer.submit(self)
        else:
            task = self.task = self.loop.create_task(self._single())
            task.add_done_callback(self._single_done)

    async def _single(self) -> bool:
        sw = self.swap
        return await self.lease.stores.supervision.compare_and_swap(
            sw.key, sw.principal, sw.expected_epoch, sw.row
        )

    def _single_done(self, task: asyncio.Task[bool]) -> None:
        if self.task is not task or not self.out:  # timed out before it ended
            return
        self.task = None
        if task.cancelled():
            self.resolve(None, asyncio.CancelledError())
        elif (error := task.exception()) is not None:
            self.resolve(None, error)
        else:
            self.resolve(SwapOutcome(task.result()), None)

    def resolve(self, outcome: SwapOutcome | None, error: BaseException | None) -> None:
        """The beat out was answered (the coalescer, or the single call, calls this)."""
        self.settled = True
        self.out = False
        idle = self._idle
        if idle is not None and not idle.done():
            idle.set_result(None)
        if self.stopped.done():  # stopped meanwhile: the seal or release that follows judges
            return
        if outcome is not None and outcome.error is None and outcome.swapped:
            self.lease.heartbeats += 1
            on_beat = self.config.on_beat
            if on_beat is not None:
                on_beat(*self.sent_at, self.loop.time())
            if self.owed is not None:
                slot, self.owed = self.owed, None
                self._send(slot, self.ticker.now())
            return
        self._end(outcome, error)

    def expire(self, slot: int) -> None:
        """At ``slot``: a beat still out past its deadline loses the lease."""
        if self.out and slot >= self.deadline and not self.stopped.done():
            self._end(None, TimeoutError())

    def _end(self, outcome: SwapOutcome | None, error: BaseException | None) -> None:
        """The lease is lost: refused, failed or timed out (a late answer is ignored)."""
        lease = self.lease
        self.settled = True
        reason: BaseException
        if isinstance(error, TimeoutError):
            reason = TimeoutError(f"heartbeat took longer than {self.config.beat_timeout}s")
        elif error is not None:
            reason = error
        elif outcome is not None and outcome.error is not None:
            reason = outcome.error
        else:
            reason = FencedError(
                "heartbeat refused: the supervision row moved on",
                key=lease.key,
                epoch=lease.epoch,
            )
        self.out = False
        if self.task is not None:  # a single call still hanging: give up on it
            self.task.cancel()
        idle = self._idle
        if idle is not None and not idle.done():
            idle.set_result(None)
        lease.mark_lost(reason)

    def halt(self) -> None:
        """Beat no more; a beat not yet sent is withdrawn (one sent is left to finish)."""
        if not self.stopped.done():
            self.stopped.set_result(None)
        if self.out and self.coalescer is not None and self.batch is None:
            self.settled = True  # withdrawn: the coalescer skips it
            self.out = False

    async def idle(self) -> None:
        """Return once no beat is out (a sent one answered, failed or timed out)."""
        if not self.out:
            return
        if self.task is not None:
            await asyncio.wait([self.task], timeout=self.config.beat_timeout)
            return
        if self._idle is None:
            self._idle = self.loop.create_future()
        await self._idle


class _Expiry:
    """A ticker entry checking a heartbeat's deadline (only when a beat is still out as
    its deadline nears, or with a timeout shorter than the interval)."""

    __slots__ = ("heartbeat",)

    def __init__(self, heartbeat: _Heartbeat) -> None:
        self.heartbeat = heartbeat

    def tick(self, slot: int) -> None:
        """Check the deadline (the ticker calls this)."""
        self.heartbeat.expire(slot)


async def claim(
    stores: Stores,
    key: ConversationKey,
    principal: str,
    message_id: str,
    *,
    lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG,
    resume_live: bool = True,
) -> Lease:
    """Take the turn for ``message_id``, or raise :class:`BusyError` naming the occupant.

    No row, a sealed row or a dead row (store clock) -> a new epoch; a live row for the
    same message -> resume it with a new epoch (fencing the old producer) unless
    ``resume_live`` is False; a live row for another message -> ``BusyError``. The new
    epoch is ``max(row.epoch, fence) + 1``. A lost compare-and-swap re-reads and
    re-decides, at most ``lease_config.claim_attempts`` times.

    Raises:
        BusyError: a live turn for another message holds the conversation
            (``.occupant`` names it).
        ConflictError: the compare-and-swap was lost ``lease_config.claim_attempts`` times.
        ErasedError: the conversation was erased.
        NotOwnedError: another principal owns the conversation.
    """
    validate_id(message_id, "message_id")
    for _ in range(lease_config.claim_attempts):
        view = await stores.supervision.read(key, principal)
        row = view.row
        verdict = liveness(view, lease_config.dead_after)
        reason: ClaimReason
        if verdict == "absent":
            reason = "new"
        elif verdict == "sealed":
            reason = "sealed"
        elif verdict == "dead":
            reason = "dead"
        elif row is not None and row.message_id == message_id and resume_live:
            reason = "resume"
        else:
            assert row is not None
            raise BusyError(
                f"turn {row.message_id!r} is running on this conversation",
                key=key,
                occupant=row.message_id,
                epoch=row.epoch,
            )
        expected = row.epoch if row is not None else None
        epoch = max(expected or 0, view.fence) + 1
        new_row = SupervisionRow("running", message_id, epoch)
        if await stores.supervision.compare_and_swap(key, principal, expected, new_row):
            return Lease(
                stores,
                key,
                principal,
                message_id,
                epoch,
                lease_config=lease_config,
                reason=reason,
                previous=row,
                previous_age=heartbeat_age(row, view.now) if row is not None else None,
            )
        if row is None:
            await _raise_if_erased(stores, key, principal)
    raise ConflictError(
        f"lost the claim race {lease_config.claim_attempts} times", key=key, message_id=message_id
    )


async def _raise_if_erased(stores: Stores, key: ConversationKey, principal: str) -> None:
    """A CAS on an absent row fails on a tombstone; every write there raises ErasedError.

    The probe is a guarded recording delete for a message id that cannot exist, so it
    changes nothing on a live key.
    """
    await stores.recording.delete(key, principal, f"probe-{uuid.uuid4().hex}")


__all__ = [
    "DEFAULT_LEASE_CONFIG",
    "ClaimReason",
    "Lease",
    "LeaseConfig",
    "LeaseStatus",
    "Liveness",
    "claim",
    "heartbeat_age",
    "liveness",
]
