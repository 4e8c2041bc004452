"""A handler for the ``ConversationUpdated`` event the SDK queues after every turn.

With a conversation store wired, the SDK's chat handler queues ``ConversationUpdated``
once the answer is stored, and its message bus raises ``KeyError`` for an event nobody
handles: every streamed turn then ends in an SSE error frame although the answer was
stored. This registry holds a handler that logs the event (the hook for mirroring
transcripts elsewhere; register your own beside it).
"""

from __future__ import annotations

import logging
from typing import Any

from zav.agents_sdk.handlers import EventHandlerRegistry
from zav.agents_sdk.handlers.events import ConversationUpdated

log = logging.getLogger(__name__)


class ZavEventHandlers(EventHandlerRegistry):
    """The events the bridge handles, merged into the SDK's registry by ``setup_app``."""

    registry: dict[type, list[Any]] = {}  # noqa: RUF012 - the SDK's registry shape


@ZavEventHandlers.register(ConversationUpdated)
async def conversation_updated(event: ConversationUpdated, queue: list[Any]) -> None:
    """Acknowledge a stored turn (nothing else to do: the transcript is already durable)."""
    log.debug("conversation %s of %s updated", event.session_id, event.tenant)


__all__ = ["ZavEventHandlers", "conversation_updated"]
