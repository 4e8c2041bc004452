"""The AI SDK's UI message stream (v1) as server-sent events.

Each part is one SSE event ``data: <json>``; the stream ends with ``data: [DONE]``. An event
that carries answer text also has ``id: <index>``, the answer's length in characters after
it, so a plain ``EventSource`` reconnects with ``Last-Event-ID`` and continues from there.
"""

from __future__ import annotations

import json
from typing import Any

HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
}
"""Response headers of every UI message stream (the first names the protocol for the SDK)."""
MEDIA_TYPE = "text/event-stream"
LEASE_PART = "data-agentstores-lease"
"""A transient part telling the client the turn changed hands: ``{epoch, reason}``."""


def event(part: dict[str, Any], *, index: int | None = None) -> bytes:
    """One SSE event holding ``part``, with ``id: index`` when given."""
    data = json.dumps(part, ensure_ascii=False, separators=(",", ":"))
    head = f"id: {index}\n" if index is not None else ""
    return f"{head}data: {data}\n\n".encode()


def start(message_id: str) -> bytes:
    """The message begins: the client makes an assistant message with this id."""
    return event({"type": "start", "messageId": message_id})


def text_start(part_id: str) -> bytes:
    """A text part begins."""
    return event({"type": "text-start", "id": part_id})


def text_delta(part_id: str, delta: str, index: int) -> bytes:
    """More answer text; ``index`` is the answer's length after it."""
    return event({"type": "text-delta", "id": part_id, "delta": delta}, index=index)


def text_end(part_id: str) -> bytes:
    """The text part is complete."""
    return event({"type": "text-end", "id": part_id})


def finish() -> bytes:
    """The message is complete."""
    return event({"type": "finish"})


def error(text: str) -> bytes:
    """The turn failed; ``text`` is shown to the user (nothing internal in it)."""
    return event({"type": "error", "errorText": text})


def lease(epoch: int, reason: str) -> bytes:
    """The turn changed hands (a takeover): shown by a client, never stored in the message."""
    return event(
        {"type": LEASE_PART, "data": {"epoch": epoch, "reason": reason}, "transient": True}
    )


def comment(text: str = "keep-alive") -> bytes:
    """An SSE comment: keeps idle proxies from closing the stream."""
    return f": {text}\n\n".encode()


DONE = b"data: [DONE]\n\n"

__all__ = [
    "DONE",
    "HEADERS",
    "LEASE_PART",
    "MEDIA_TYPE",
    "comment",
    "error",
    "event",
    "finish",
    "lease",
    "start",
    "text_delta",
    "text_end",
    "text_start",
]
