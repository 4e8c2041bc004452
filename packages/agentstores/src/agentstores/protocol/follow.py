"""The follower: stream a running turn's answer to a reconnecting client or second screen.

Any replica can call :func:`follow`: it needs only the stores. Before each read it judges
the supervision row on the store's clock, then reads the recording (the producer's latest
cumulative snapshot ``{"text": ...}`` with ``index == len(text)``) and yields only what the
client has not seen. The text never goes back and never skips: each update carries the
whole text so far and the part that is new. The iterator ends with one
:class:`FollowEnd` whose verdict says how the turn ended.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Literal

from ..errors import UsageError
from ..keys import ConversationKey, validate_id
from ..models import JSON, RecordedEvent, TranscriptMessage, check_counter
from ..stores import Stores
from .lease import DEFAULT_LEASE_CONFIG, heartbeat_age, liveness
from .rehydrate import message_text
from .shared_reads import shared_reads

log = logging.getLogger(__name__)

SPREAD = 1.2
"""A follower waits ``poll`` (or ``safety_poll``) times a factor from 1 to this between reads."""

FollowVerdict = Literal["done", "errored", "gone", "dead"]
"""How a followed turn ended (see :func:`follow`)."""


@dataclass(frozen=True, slots=True)
class FollowUpdate:
    """New answer text: ``text`` is all of it so far, ``delta`` the part not yielded before.

    ``index == len(text)``; ``epoch`` is the lease epoch of the producer that wrote it.
    """

    index: int
    text: str
    delta: str
    message_id: str
    epoch: int


@dataclass(frozen=True, slots=True)
class FollowEnd:
    """The last event of a follow: the ``verdict`` and, when found, the final message.

    ``index`` is the last index the client has (yielded, or its ``start_index``).
    ``behind`` counts distinct snapshots that were behind it (suppressed: a takeover
    resuming from an older checkpoint); ``skipped`` counts distinct snapshots that were
    malformed or did not extend the text already yielded (never streamed).
    """

    verdict: FollowVerdict
    message: TranscriptMessage | None = None
    message_id: str | None = None
    index: int = 0
    behind: int = 0
    skipped: int = 0


FollowEvent = FollowUpdate | FollowEnd
"""What :func:`follow` yields: updates, then one end."""


def snapshot_text(message: JSON) -> str | None:
    """The text of a recorded snapshot: ``{"text": str}`` (what a turn records) or a str."""
    if isinstance(message, str):
        return message
    if isinstance(message, dict):
        text = message.get("text")
        if isinstance(text, str):
            return text
    return None


class _Progress:
    """What the client has seen, and the rule for what it may be shown next."""

    def __init__(self, start_index: int) -> None:
        self.index = start_index
        self.text: str | None = "" if start_index == 0 else None
        """The text yielded so far; None while only its length (``start_index``) is known."""
        self.behind = 0
        self.skipped = 0
        self._last_seen: tuple[int, int] | None = None

    def offer(
        self, text: str | None, index: int, message_id: str, epoch: int
    ) -> FollowUpdate | None:
        """An update if ``text`` extends what the client has; else None (and count why)."""
        seen = (epoch, index)
        fresh = seen != self._last_seen
        self._last_seen = seen
        if text is None or len(text) != index:
            if fresh:
                self.skipped += 1
                log.warning(
                    "follow: snapshot at index %d is not {'text': <%d chars>}", index, index
                )
            return None
        if index <= self.index:
            if fresh and index < self.index:
                self.behind += 1
            return None
        if self.text is not None and not text.startswith(self.text):
            if fresh:
                self.skipped += 1
                log.warning("follow: snapshot at index %d does not extend the streamed text", index)
            return None
        update = FollowUpdate(index, text, text[self.index :], message_id, epoch)
        self.index, self.text = index, text
        return update

    def end(
        self, verdict: FollowVerdict, message: TranscriptMessage | None, message_id: str | None
    ) -> FollowEnd:
        """The closing event, with the counts."""
        return FollowEnd(verdict, message, message_id, self.index, self.behind, self.skipped)


async def final_message(
    stores: Stores, key: ConversationKey, principal: str, message_id: str
) -> TranscriptMessage | None:
    """The transcript message with id ``message_id``: the tail first, else a scan from the end."""
    conversations = stores.conversations
    tail = await conversations.get_transcript(key, principal, index=-1)
    if tail and tail[0].id == message_id:
        return tail[0]
    for message in reversed(await conversations.get_transcript(key, principal)):
        if message.id == message_id:
            return message
    return None


def _check_args(
    start_index: int, poll: float, safety_poll: float, dead_after: float, grace: float
) -> None:
    check_counter(start_index, "start_index")
    for name, value in (("poll", poll), ("safety_poll", safety_poll), ("dead_after", dead_after)):
        if not (_seconds(value) and value > 0):
            raise UsageError(f"{name} must be a positive number of seconds, got {value!r}")
    if not (_seconds(grace) and grace >= 0):
        raise UsageError(f"grace must be a non-negative number of seconds, got {grace!r}")


def _seconds(value: object) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


async def follow(
    stores: Stores,
    key: ConversationKey,
    principal: str,
    start_index: int = 0,
    *,
    message_id: str | None = None,
    partial: bool = False,
    poll: float = 0.3,
    safety_poll: float = 2.0,
    dead_after: float = DEFAULT_LEASE_CONFIG.dead_after,
    grace: float | None = None,
) -> AsyncGenerator[FollowEvent, None]:
    """Stream the conversation's running turn until it ends; yield updates, then a FollowEnd.

    The turn followed is ``message_id``, or whichever the supervision row holds at the
    first read. Each read is woken by the bundle's wake-ups (:mod:`agentstores.stores.wakeups`:
    a write to the key in this process, or in another one where the backend pushes
    changes), else comes ``poll`` seconds after the last (``safety_poll`` while the backend
    pushes), times a random factor from 1 to 1.2 so followers that began together do not
    read in step. A wake-up only triggers a read: a lost, repeated or late one delays an update
    to the next poll at most, and never changes what is yielded. Followers of the same
    answer in one process share reads (:mod:`.shared_reads`): one write costs one read of
    each store however many follow it. Each read takes the row first and judges it on the
    store's clock:

    - ``running`` and live: the recording is read; a snapshot of this message, written
      at the row's epoch or later, with ``index > `` what the client has (``start_index``
      or the last update) and extending the text already yielded, is yielded as a
      :class:`FollowUpdate`. A follower started at 0 mid-turn gets the whole text so far
      at once; one started at ``start_index`` gets only what lies beyond it. A takeover
      (new epoch, same message) resumes from a checkpoint that may be behind: its
      snapshots are suppressed until they pass the last yielded index.
    - ``running`` but dead (heartbeat older than ``dead_after``): nothing is streamed
      (the dead producer's partial snapshot only with ``partial=True``) while a takeover
      may still come; once the heartbeat is older than ``dead_after + grace`` (``grace``
      defaults to ``dead_after``: a standby needs ``dead_after`` to see the death and a
      moment to claim), the follow ends ``dead`` (with ``partial=True``, after streaming
      the snapshot it left).
    - sealed ``done`` / ``errored``: the final transcript message with the turn's id is
      read; text in it beyond what was streamed is yielded, then the follow ends with
      the row's status and that message (None if the transcript lacks it).
    - no row, or the row holds another message: the producer sealed and released (or
      the next turn began) between two polls if the transcript holds the message, which
      ends ``done`` as above; otherwise ``gone`` (never started, invisible to
      ``principal``, or erased). With no ``message_id`` and no row at the first read,
      the follow ends ``gone`` at once.

    Close the generator (``aclose``) or cancel its task to stop following early.
    Store errors (such as :class:`~agentstores.errors.BackendUnavailableError`) propagate;
    the client can reconnect with ``start_index`` set to the last index it received.

    Args:
        stores: An open bundle of the backend the producer writes to.
        key: The conversation.
        principal: Whom the reads are made as (owner or a principal it is shared with).
        start_index: How many characters of the answer the client already has.
        message_id: The turn to follow; None follows whichever turn the row holds.
        partial: Also stream a dead producer's snapshot.
        poll: Seconds between two reads when no wake-up comes and the backend does not
            push other processes' changes.
        safety_poll: Seconds between two reads when no wake-up comes while the backend
            pushes them (a lost wake-up costs at most this much delay).
        dead_after: Heartbeat age (store clock) from which the producer counts as dead;
            use the producers' ``LeaseConfig.dead_after``.
        grace: Seconds past ``dead_after`` to wait for a takeover (default ``dead_after``).

    Yields:
        FollowUpdate events, then exactly one FollowEnd.

    Raises:
        UsageError: a negative ``start_index``, a non-positive ``poll``, ``safety_poll``
            or ``dead_after``, a negative ``grace`` or a malformed ``message_id``.
    """
    grace_s = dead_after if grace is None else grace
    _check_args(start_index, poll, safety_poll, dead_after, grace_s)
    target = None if message_id is None else validate_id(message_id, "message_id")
    # Watching starts before the first read: a write between a read and the wait that
    # follows it wakes that wait.
    reads = shared_reads(stores)
    with stores.wakeups.watch(key) as watch:
        progress = _Progress(start_index)
        epoch = 0
        while True:
            view = await reads.read(
                "supervision", key, principal, lambda: stores.supervision.read(key, principal)
            )
            row = view.row
            if row is None or (target is not None and row.message_id != target):
                # Over between two polls (sealed and released, or the next turn began) if the
                # transcript holds the message; otherwise never here, invisible or erased.
                message = None
                if target is not None:
                    message = await final_message(stores, key, principal, target)
                verdict: FollowVerdict = "gone" if message is None else "done"
                for event in _finish(progress, verdict, message, target, epoch):
                    yield event
                return
            target, epoch = row.message_id, row.epoch
            judged = liveness(view, dead_after)
            if judged == "sealed":
                message = await final_message(stores, key, principal, target)
                verdict = "done" if row.status == "done" else "errored"
                for event in _finish(progress, verdict, message, target, epoch):
                    yield event
                return
            age = heartbeat_age(row, view.now)
            given_up = judged == "dead" and (age is None or age > dead_after + grace_s)
            if judged == "live" or partial:
                record = await reads.read(
                    "recording", key, principal, lambda: stores.recording.read(key, principal)
                )
                update = _offer(progress, record, target, epoch)
                if update is not None:
                    yield update
            if given_up:
                yield progress.end("dead", None, target)
                return
            await watch.wait((safety_poll if watch.pushed else poll) * _spread())


def _spread() -> float:
    """A wait's factor, drawn anew each time from 1 to :data:`SPREAD`: followers that began
    together (a page of tabs, every follower a reconnecting listener woke at once) drift
    apart instead of reading the store in step, a burst per poll."""
    return random.uniform(1.0, SPREAD)


def _offer(
    progress: _Progress, record: RecordedEvent | None, message_id: str, epoch: int
) -> FollowUpdate | None:
    """An update from ``record`` if it is this turn's, written under the current lease or later."""
    if record is None or record.message_id != message_id or record.epoch < epoch:
        return None
    return progress.offer(snapshot_text(record.message), record.index, message_id, record.epoch)


def _finish(
    progress: _Progress,
    verdict: FollowVerdict,
    message: TranscriptMessage | None,
    message_id: str | None,
    epoch: int,
) -> list[FollowEvent]:
    """The last events: the final message's text beyond what was streamed, then the end.

    The final text is what :func:`~agentstores.protocol.message_text` finds in the content
    (a string, a mapping's text, or the text parts of a list).

    ``epoch`` is the last lease epoch seen for the turn (0 if none was seen).
    """
    events: list[FollowEvent] = []
    text = message_text(message.content) if message is not None else ""
    if text and message_id is not None:
        update = progress.offer(text, len(text), message_id, epoch)
        if update is not None:
            events.append(update)
    events.append(progress.end(verdict, message, message_id))
    return events


__all__ = [
    "FollowEnd",
    "FollowEvent",
    "FollowUpdate",
    "FollowVerdict",
    "final_message",
    "follow",
    "snapshot_text",
]
