"""The producers this replica runs: new turns, takeovers of dead ones, and handing them
over at shutdown.

A producer runs in its own task, never in a request's: the answer belongs to the
conversation, so a client that goes away does not stop it. The task is bound to the
lease, so a stop or a takeover elsewhere cancels it wherever it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentstores import Conversation, Stores
from agentstores.errors import BusyError, LeaseLostError, UsageError
from agentstores.keys import ConversationKey
from agentstores.models import Message
from agentstores.protocol import LeaseConfig, Turn, claim, liveness
from agentstores.protocol.follow import snapshot_text

from .context import ProduceContext, Producer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """How this replica's turns run: the lease timings and how often text is recorded."""

    lease_config: LeaseConfig
    stream_every: float


class Runner:
    """Starts, takes over and (at shutdown) abandons this replica's producer tasks."""

    def __init__(self, producer: Producer, settings: TurnSettings) -> None:
        self.producer = producer
        self.settings = settings
        self._running: dict[asyncio.Task[None], Turn] = {}
        self._closing = False

    async def start(
        self, conv: Conversation, message_id: str, user: Message, expected_tail: str | None
    ) -> Turn:
        """Claim a new turn (stale-guarded, the user's message appended) and start its
        producer; returns once the turn holds the lease.

        Raises:
            BusyError, StaleWriteError, NotOwnedError, ErasedError, UsageError: from the claim.
        """
        turn = Turn(
            conv.stores,
            conv.key,
            conv.principal,
            message_id,
            user=user,
            expected_tail=expected_tail,
            stream_every=self.settings.stream_every,
            lease_config=self.settings.lease_config,
        )
        await self._launch(conv, turn, user)
        return turn

    async def take_over(self, conv: Conversation, message_id: str) -> Turn | None:
        """Take the dead turn ``message_id`` over and resume producing it here.

        Returns the turn, or None when it is not dead any more (another replica won the
        claim, or it ended).

        Raises:
            NotOwnedError: the caller is not the owner (only the owner's turns are produced).
        """
        stores, key, principal = conv.stores, conv.key, conv.principal
        config = self.settings.lease_config
        view = await stores.supervision.read(key, principal)
        row = view.row
        if (
            row is None
            or row.message_id != message_id
            or liveness(view, config.dead_after) != "dead"
        ):
            return None
        try:
            lease = await claim(
                stores, key, principal, message_id, lease_config=config, resume_live=False
            )
        except BusyError:
            return None  # another replica took it
        previous = lease.previous
        if previous is None or previous.status != "running" or previous.message_id != message_id:
            # It ended between the read and the claim: give the verdict back untouched.
            if previous is None:
                await lease.release()
            else:
                await lease.seal("errored" if previous.status == "errored" else "done")
            return None
        record = await stores.recording.read(key, principal)
        text = ""
        if record is not None and record.message_id == message_id and record.epoch <= lease.epoch:
            text = snapshot_text(record.message) or ""
        user = await _user_message(stores, key, principal)
        turn = Turn(
            stores,
            key,
            principal,
            message_id,
            stream_every=self.settings.stream_every,
            lease_config=config,
            lease=lease,
            text=text,
        )
        await self._launch(conv, turn, user)
        return turn

    async def _launch(self, conv: Conversation, turn: Turn, user: Message | None) -> None:
        """Enter ``turn`` in a new task and produce there; return once it is entered."""
        if self._closing:
            raise UsageError("this replica is shutting down")
        entered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._produce(conv, turn, user, entered))
        self._running[task] = turn
        task.add_done_callback(self._forget)
        await asyncio.shield(entered)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("producer task failed", exc_info=task.exception())

    async def _produce(
        self, conv: Conversation, turn: Turn, user: Message | None, entered: asyncio.Future[None]
    ) -> None:
        try:
            await turn.__aenter__()
        except BaseException as exc:
            entered.set_exception(exc)
            return
        entered.set_result(None)
        task = asyncio.current_task()
        assert task is not None
        turn.lease.bind(task)  # a stop or takeover elsewhere cancels the producer
        ctx = ProduceContext(conv, user, turn.text, turn)
        try:
            await _stream_all(self.producer(ctx), turn)
        except BaseException as exc:
            lost = turn.lost.is_set()
            await turn.__aexit__(type(exc), exc, exc.__traceback__)
            if lost or isinstance(exc, LeaseLostError):
                log.info(
                    "turn %s on %r stopped: its lease went elsewhere", turn.message_id, turn.key
                )
                return
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.error("producer of turn %s failed", turn.message_id, exc_info=exc)
            return
        try:
            await turn.__aexit__(None, None, None)
        except LeaseLostError:
            log.info(
                "turn %s on %r was stopped or taken over at its end", turn.message_id, turn.key
            )

    async def abandon_all(self) -> None:
        """Hand every running turn over (shutdown): stop beating, seal nothing, so a
        replica still up takes each over once it is dead."""
        self._closing = True
        running = list(self._running.items())
        for task, turn in running:
            with contextlib.suppress(Exception):
                await turn.abandon()
            task.cancel()
        for task, _ in running:
            with contextlib.suppress(BaseException):
                await task


async def _stream_all(deltas: AsyncIterator[str], turn: Turn) -> None:
    """Stream every delta into ``turn``; close the producer however this ends."""
    try:
        async for delta in deltas:
            if not isinstance(delta, str):
                raise UsageError(f"a producer yields str deltas, got {type(delta).__name__}")
            if delta:
                await turn.stream(turn.text + delta)
    finally:
        close = getattr(deltas, "aclose", None)
        if close is not None:
            await close()


async def _user_message(stores: Stores, key: ConversationKey, principal: str) -> Message | None:
    """The turn's user message: the transcript's tail while the answer is in flight."""
    tail = await stores.conversations.tail(key, principal, 1)
    if tail is None or not tail.messages or tail.messages[-1].role != "user":
        return None
    last = tail.messages[-1]
    return Message(last.id, "user", last.content, dict(last.metadata))


__all__ = ["Runner", "TurnSettings"]
