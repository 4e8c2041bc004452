"""One drill process: ``python -m agentstores_tools.drill.worker ROLE --tenant T ...``,
with the store's URL in ``$AGENTSTORES_DRILL_URL`` (:data:`URL_ENV`).

Roles:
- ``producer`` starts turn N (stale-guarded), appends the user message and streams the
  answer under its lease; with ``--probe-on-loss`` a producer that finds itself fenced
  then attempts every write it could still make, with its old epoch, and reports which
  the stores refused.
- ``standby`` waits until turn N's producer is dead on the store clock, takes the turn
  over with a higher epoch, resumes from the checkpoint and finishes it.
- ``follower`` follows turn N with ``agentstores.protocol.follow`` like a reconnecting
  client and checks that every update is the expected text, that nothing went back or was
  skipped, and that the turn ended ``done`` with the expected final message.

Every worker prints one JSON object per line on stdout (``event`` plus fields, and
``t``: ``time.monotonic()``, comparable across processes on one host).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from agentstores.api import open_stores
from agentstores.errors import AgentStoresError, ErasedError, FencedError, LeaseLostError
from agentstores.keys import ConversationKey
from agentstores.models import Message, RecordedEvent, SupervisionRow
from agentstores.protocol import (
    FollowEnd,
    Lease,
    LeaseConfig,
    claim,
    follow,
    liveness,
    start_turn,
)
from agentstores.protocol.lease import heartbeat_age
from agentstores.stores import Stores

from .script import (
    PRINCIPAL,
    Timings,
    answer_message_id,
    conversation_key,
    expected_text,
    user_message_id,
)

URL_ENV = "AGENTSTORES_DRILL_URL"
"""The environment variable a worker reads its store URL from. A URL may hold a password,
and any local user can read a process's command line (``/proc/PID/cmdline``); only the
process's own user can read its environment."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_LANDED = 3
"""A fenced producer's write was accepted by a store."""


def emit(event: str, **fields: Any) -> None:
    """Print one event as a JSON line on stdout, stamped with ``t`` (monotonic time) and
    flushed at once so the runner sees it when it happens."""
    print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)


class Producer:
    """Streams one turn's answer under a lease, flushing and checkpointing on the timings."""

    def __init__(self, lease: Lease, turn: int, timings: Timings) -> None:
        self.lease = lease
        self.turn = turn
        self.timings = timings
        self.text = expected_text(turn, timings.length)
        self.position = 0
        self.published = 0

    async def stream(self, start: int, published: int) -> None:
        """Stream the answer from character ``start`` (``published`` of them already
        recorded), then append it to the transcript, seal the turn and drop the recording."""
        t = self.timings
        lease = self.lease
        loop = asyncio.get_running_loop()
        self.position, self.published = start, published
        last_flush = last_checkpoint = loop.time()
        while self.position < len(self.text):
            await asyncio.sleep(t.tick)
            self.position = min(len(self.text), self.position + t.chunk)
            now = loop.time()
            if now - last_flush >= t.flush and self.position > self.published:
                await lease.record(self.position, {"text": self.text[: self.position]})
                self.published = self.position
                last_flush = now
                emit("flush", index=self.position, epoch=lease.epoch)
            if now - last_checkpoint >= t.checkpoint:
                await lease.save_state(self._state())
                last_checkpoint = now
                emit("checkpoint", position=self.position, epoch=lease.epoch)
        await lease.record(len(self.text), {"text": self.text})
        self.published = len(self.text)
        await lease.save_state({**self._state(), "done": True})
        await lease.append(
            [self._answer()],
            expected_tail=user_message_id(self.turn),
            last_turn_status="complete",
        )
        await lease.seal("done")
        dropped = await lease.drop_recording()
        emit("finished", epoch=lease.epoch, chars=len(self.text), recording_dropped=dropped)

    def _state(self) -> dict[str, Any]:
        return {"message_id": self.lease.message_id, "position": self.position}

    def _answer(self) -> Message:
        return Message(
            self.lease.message_id, "assistant", self.text, metadata={"epoch": self.lease.epoch}
        )

    async def probe_stale_writes(self) -> dict[str, Any]:
        """Attempt every write a fenced producer could still make, with its old epoch.

        Goes to the stores directly (not through the lost lease, which would refuse
        locally), so each refusal below is the store's own.
        """
        stores, key, lease = self.lease.stores, self.lease.key, self.lease
        epoch, mid = lease.epoch, lease.message_id
        nxt = min(len(self.text), self.position + self.timings.chunk)
        attempts: list[tuple[str, Awaitable[Any]]] = [
            (
                "recording.put",
                stores.recording.put(
                    key, PRINCIPAL, RecordedEvent(nxt, {"text": self.text[:nxt]}, mid, epoch)
                ),
            ),
            (
                "state.save",
                stores.state.save(key, PRINCIPAL, {**self._state(), "stale": True}, epoch=epoch),
            ),
            (
                "conversations.append_messages",
                stores.conversations.append_messages(
                    key,
                    PRINCIPAL,
                    [self._answer()],
                    create_if_absent=False,
                    expected_tail=user_message_id(self.turn),
                    epoch=epoch,
                ),
            ),
            (
                "conversations.set_last_turn_status",
                stores.conversations.set_last_turn_status(key, PRINCIPAL, "errored", epoch=epoch),
            ),
            (
                "supervision.compare_and_swap",
                stores.supervision.compare_and_swap(
                    key, PRINCIPAL, epoch, SupervisionRow("done", mid, epoch)
                ),
            ),
            ("supervision.delete", stores.supervision.delete(key, PRINCIPAL, mid, epoch)),
            ("recording.delete", stores.recording.delete(key, PRINCIPAL, mid, epoch=epoch)),
            ("state.delete", stores.state.delete(key, PRINCIPAL, epoch=epoch)),
        ]
        refused: list[str] = []
        landed: list[str] = []
        errors: list[str] = []
        for name, call in attempts:
            try:
                result = await call
            except (FencedError, ErasedError) as exc:
                refused.append(f"{name}: {type(exc).__name__}")
                continue
            except AgentStoresError as exc:
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            if result is False:
                refused.append(f"{name}: returned False")
            else:
                landed.append(f"{name}: returned {result!r}")
        return {"attempted": len(attempts), "refused": refused, "landed": landed, "errors": errors}


def _config(t: Timings) -> LeaseConfig:
    return LeaseConfig(dead_after=t.dead_after, heartbeat_interval=t.heartbeat)


async def _produce(lease: Lease, producer: Producer, start: int, published: int) -> int:
    """Run the stream under the heartbeat; report a lost lease instead of crashing."""
    try:
        await lease.run(producer.stream(start, published))
    except (LeaseLostError, FencedError, ErasedError) as exc:
        cause = exc.__cause__ if isinstance(exc, LeaseLostError) else exc
        emit(
            "fenced",
            epoch=lease.epoch,
            position=producer.position,
            published=producer.published,
            error=type(exc).__name__,
            reason=f"{type(cause).__name__}: {cause}" if cause else None,
        )
        return EXIT_FAILED
    return EXIT_OK


async def run_producer(stores: Stores, key: ConversationKey, args: argparse.Namespace) -> int:
    """Start turn ``args.turn`` and stream its answer under the lease. On losing the lease,
    with ``--probe-on-loss``, attempt every stale write and exit :data:`EXIT_LANDED` unless the
    stores refused them all."""
    t: Timings = args.timings
    turn: int = args.turn
    lease = await start_turn(
        stores,
        key,
        PRINCIPAL,
        answer_message_id(turn),
        args.expected_tail,
        user_message=Message(user_message_id(turn), "user", f"turn {turn}: tell me a long story"),
        lease_config=_config(t),
    )
    emit("claimed", epoch=lease.epoch, reason=lease.reason)
    producer = Producer(lease, turn, t)
    code = await _produce(lease, producer, 0, 0)
    if code != EXIT_OK and args.probe_on_loss:
        report = await producer.probe_stale_writes()
        emit("stale_writes", epoch=lease.epoch, **report)
        return EXIT_LANDED if report["landed"] or report["errors"] else EXIT_OK
    return code


async def run_standby(stores: Stores, key: ConversationKey, args: argparse.Namespace) -> int:
    """Wait until turn ``args.turn``'s producer is dead on the store clock, take the turn over
    with a higher epoch and finish it from the checkpoint (or exit if the turn was sealed)."""
    t: Timings = args.timings
    turn: int = args.turn
    mid = answer_message_id(turn)
    poll = min(t.heartbeat, t.flush) / 4
    deadline = time.monotonic() + args.max_wait
    emit("watching", message_id=mid)
    while True:
        if time.monotonic() > deadline:
            emit("error", error=f"no dead producer for {mid} within {args.max_wait}s")
            return EXIT_FAILED
        view = await stores.supervision.read(key, PRINCIPAL)
        row = view.row
        if row is not None and row.message_id == mid:
            verdict = liveness(view, t.dead_after)
            if verdict == "dead":
                emit(
                    "dead_detected",
                    epoch=row.epoch,
                    heartbeat_age=heartbeat_age(row, view.now),
                    store_now=view.now.isoformat(),
                )
                break
            if verdict == "sealed":
                emit("not_needed", status=row.status, epoch=row.epoch)
                return EXIT_OK
        await asyncio.sleep(poll)
    lease = await claim(stores, key, PRINCIPAL, mid, lease_config=_config(t), resume_live=False)
    emit(
        "claimed",
        epoch=lease.epoch,
        reason=lease.reason,
        previous_epoch=lease.previous.epoch if lease.previous else None,
        previous_age=lease.previous_age,
    )
    producer = Producer(lease, turn, t)
    state = await stores.state.load(key, PRINCIPAL)
    checkpoint = int(state.get("position", 0)) if state.get("message_id") == mid else 0
    record = await stores.recording.read(key, PRINCIPAL)
    recorded, consistent = 0, True
    if record is not None and record.message_id == mid:
        recorded = record.index
        shown = record.message.get("text") if isinstance(record.message, dict) else None
        consistent = shown == producer.text[:recorded]
    emit(
        "resumed",
        epoch=lease.epoch,
        checkpoint=checkpoint,
        recorded=recorded,
        recording_consistent=consistent,
    )
    return await _produce(lease, producer, checkpoint, max(checkpoint, recorded))


async def run_follower(stores: Stores, key: ConversationKey, args: argparse.Namespace) -> int:
    """Follow turn ``args.turn`` with :func:`~agentstores.protocol.follow` like a reconnecting
    client, checking that every update is the expected text and that nothing went back or
    was skipped, then that the turn ended ``done`` with the expected final message."""
    t: Timings = args.timings
    turn: int = args.turn
    mid = answer_message_id(turn)
    expected = expected_text(turn, t.length)
    poll = t.flush / 4
    deadline = time.monotonic() + args.max_wait
    last_index, last_text = -1, ""
    updates = divergences = 0
    epochs: list[int] = []
    longest_stall = 0.0
    problems: list[str] = []
    end: FollowEnd | None = None
    emit("following", message_id=mid)
    # The follower starts before the producer claims: wait for the turn to begin.
    while True:
        row = (await stores.supervision.read(key, PRINCIPAL)).row
        if row is not None and row.message_id == mid:
            break
        if time.monotonic() > deadline:
            problems.append(f"turn {mid} did not start within {args.max_wait}s")
            break
        await asyncio.sleep(poll)
    last_change = time.monotonic()
    try:
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            # The grace outlasts any takeover the runner waits for: the drill must end done.
            events = follow(
                stores,
                key,
                PRINCIPAL,
                message_id=mid,
                poll=poll,
                safety_poll=poll,
                dead_after=t.dead_after,
                grace=args.max_wait,
            )
            async for event in events:
                if isinstance(event, FollowEnd):
                    end = event
                    continue
                now_mono = time.monotonic()
                if event.text != expected[: event.index]:
                    divergences += 1
                    problems.append(f"snapshot at index {event.index} is not the expected text")
                if event.index <= last_index or not event.text.startswith(last_text):
                    problems.append(f"update at index {event.index} does not extend the last")
                last_index, last_text = event.index, event.text
                updates += 1
                longest_stall = max(longest_stall, now_mono - last_change)
                last_change = now_mono
                if not epochs or epochs[-1] != event.epoch:
                    epochs.append(event.epoch)
                    emit("epoch_seen", epoch=event.epoch, index=event.index)
    except TimeoutError:
        problems.append(f"turn {mid} did not finish within {args.max_wait}s")
    rollbacks = end.behind if end is not None else 0
    if end is not None:
        divergences += end.skipped
        if rollbacks:
            problems.append(f"{rollbacks} snapshots went back behind the streamed text")
        if end.skipped:
            problems.append(f"{end.skipped} snapshots did not extend the streamed text")
        if end.verdict != "done":
            problems.append(f"the follow ended {end.verdict!r}, not 'done'")
    final = [m for m in await stores.conversations.read_messages(key, PRINCIPAL) if m.id == mid]
    final_text = end.message.content if end is not None and end.message is not None else None
    if len(final) != 1:
        problems.append(f"the transcript holds {len(final)} messages with id {mid}")
    elif final_text != expected:
        problems.append("the final transcript message is not the expected answer")
    elif last_text != expected:
        problems.append("the streamed text does not end with the final answer")
    emit(
        "followed",
        updates=updates,
        rollbacks=rollbacks,
        divergences=divergences,
        epochs=epochs,
        last_streamed_index=last_index,
        verdict=end.verdict if end is not None else None,
        final_chars=len(final_text) if isinstance(final_text, str) else None,
        final_matches=final_text == expected,
        longest_stall=longest_stall,
        problems=problems,
    )
    return EXIT_OK if not problems else EXIT_FAILED


ROLES = {"producer": run_producer, "standby": run_standby, "follower": run_follower}


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line: role, the run's tenant, turn and timings (the store URL
    comes from :data:`URL_ENV`, never from here)."""
    parser = argparse.ArgumentParser(
        prog="python -m agentstores_tools.drill.worker",
        epilog=f"The store URL is read from ${URL_ENV}.",
    )
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--turn", type=int, required=True)
    parser.add_argument("--timings", type=Timings.from_json, default=Timings())
    parser.add_argument("--expected-tail", default=None, help="transcript tail before the turn")
    parser.add_argument("--probe-on-loss", action="store_true")
    parser.add_argument("--max-wait", type=float, default=120.0)
    parser.add_argument(
        "--factory",
        default=None,
        help="module:callable taking the URL and returning an unopened Stores (instead of "
        "the plugin registry)",
    )
    return parser


def open_bundle(url: str, factory: str | None) -> AbstractAsyncContextManager[Stores]:
    """The stores for ``url``: through the registry, or ``factory(url)`` when given."""
    if factory is None:
        return open_stores(url)
    module, _, attr = factory.partition(":")
    made = getattr(importlib.import_module(module), attr)(url)
    if not isinstance(made, Stores):
        raise TypeError(f"{factory} returned {type(made).__name__}, not Stores")
    return made


async def main_async(url: str, args: argparse.Namespace) -> int:
    """Open the stores at ``url`` and play the worker's role on the drill conversation."""
    key = conversation_key(args.tenant)
    async with open_bundle(url, args.factory) as stores:
        emit("ready", role=args.role, backend=stores.backend)
        return await ROLES[args.role](stores, key, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker; an unexpected error is printed as an ``error`` event, then raised."""
    parser = build_parser()
    args = parser.parse_args(argv)
    url = os.environ.get(URL_ENV)
    if not url:
        parser.error(f"${URL_ENV} must hold the store URL")
    try:
        return asyncio.run(main_async(url, args))
    except Exception as exc:
        emit("error", error=f"{type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    sys.exit(main())
