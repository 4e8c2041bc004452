"""One answer as a UI message stream, followed from the store on any replica.

Both ``POST /chat`` and ``GET /chat/{id}/stream`` serve this: the client is shown only
recorded text (what a stop keeps and a takeover resumes from), so every screen and the
transcript agree. When the producer dies, this replica tries to take the turn over (one
replica wins the claim; the others keep following) and the stream goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from agentstores import Conversation
from agentstores.errors import AgentStoresError, NotOwnedError
from agentstores.protocol import FollowEnd, follow

from . import uistream
from .service import Service

log = logging.getLogger(__name__)

MAX_DEAD_ROUNDS = 3
"""How many times in a row a follow may end ``dead`` with no takeover before the stream
gives up (a takeover by any replica resets the count)."""


async def answer_events(
    service: Service, conv: Conversation, message_id: str, start_index: int, *, announce: bool
) -> AsyncIterator[bytes]:
    """The answer ``message_id`` from character ``start_index``, as UI message stream events.

    ``announce``: begin with ``start`` and ``text-start`` (a stream from the beginning; a
    resume from ``Last-Event-ID`` continues the one the client already has).
    """
    part = f"text-{message_id}"
    index = start_index
    if announce:
        yield uistream.start(message_id)
        yield uistream.text_start(part)
    epoch: int | None = None
    dead_rounds = 0
    can_take_over = True
    try:
        while True:
            end: FollowEnd | None = None
            events = follow(
                conv.stores,
                conv.key,
                conv.principal,
                index,
                message_id=message_id,
                poll=service.follow.poll,
                safety_poll=service.follow.safety_poll,
                dead_after=service.lease_config.dead_after,
                grace=0 if can_take_over else service.lease_config.dead_after,
            )
            async for event in events:
                if isinstance(event, FollowEnd):
                    end = event
                    break
                if epoch is not None and event.epoch != epoch and await _running(conv):
                    yield uistream.lease(event.epoch, "takeover")
                epoch = event.epoch
                index = event.index
                dead_rounds = 0
                yield uistream.text_delta(part, event.delta, index)
            await events.aclose()
            if end is None or end.verdict == "done":
                break
            if end.verdict == "errored":
                yield uistream.error("the answer failed")
                yield uistream.DONE
                return
            if end.verdict == "gone":
                yield uistream.error("the answer is gone (the conversation changed or was erased)")
                yield uistream.DONE
                return
            dead_rounds += 1
            if dead_rounds > MAX_DEAD_ROUNDS:
                yield uistream.error("the answer stopped: its producer died")
                yield uistream.DONE
                return
            if can_take_over:
                try:
                    turn = await service.runner.take_over(conv, message_id)
                except NotOwnedError:
                    can_take_over = False  # a reader it is shared with waits for the owner
                    continue
                if turn is not None:
                    epoch = turn.epoch
                    dead_rounds = 0
                    yield uistream.lease(turn.epoch, "takeover")
    except AgentStoresError as exc:
        log.warning("stream of %s ended by %s", message_id, type(exc).__name__)
        yield uistream.error("the answer could not be read; reconnect to resume")
        yield uistream.DONE
        return
    yield uistream.text_end(part)
    yield uistream.finish()
    yield uistream.DONE


async def _running(conv: Conversation) -> bool:
    """True while a turn runs (a new epoch then is a takeover, not a stop or an end)."""
    row = (await conv.stores.supervision.read(conv.key, conv.principal)).row
    return row is not None and row.status == "running"


__all__ = ["answer_events"]
