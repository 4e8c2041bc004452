"""The chat routes: start a turn, resume its stream, ask which turn runs, stop it."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from agentstores import Conversation
from agentstores.models import Message, new_message_id
from agentstores.protocol import liveness

from . import uistream
from .answer import answer_events
from .context import Identity
from .errors import ApiError, invalid, not_found
from .requests import an_id, json_body
from .service import Service
from .shapes import message_json


def _stream(
    service: Service, conv: Conversation, message_id: str, start: int, announce: bool
) -> Response:
    events = answer_events(service, conv, message_id, start, announce=announce)
    return StreamingResponse(events, media_type=uistream.MEDIA_TYPE, headers=uistream.HEADERS)


def _user_text(message: Any) -> str:
    """The text of the AI SDK UIMessage ``message``: its text parts, joined."""
    if not isinstance(message, dict) or message.get("role") != "user":
        raise invalid("the last message must be the new user message")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise invalid("the user message must have parts")
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise invalid("every part must be an object with a type")
        if part["type"] == "text":
            if not isinstance(part.get("text"), str):
                raise invalid("a text part must have a string text")
            texts.append(part["text"])
    if not texts:
        raise invalid("the user message has no text part")
    return "".join(texts)


async def post_chat(service: Service, request: Request, who: Identity) -> Response:
    """Start a turn for the new user message and stream its answer (AI SDK transport body)."""
    body = await json_body(request, service.max_body_bytes)
    trigger = body.get("trigger", "submit-message")
    if trigger != "submit-message":
        raise invalid(f"trigger {trigger!r} is not supported (only submit-message)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages must be a non-empty list")
    conv = service.conversation(request, who, body.get("id"))
    last = messages[-1]
    text = _user_text(last)
    user_id = an_id(last.get("id"), "message id")
    expected_tail: str | None = None
    if len(messages) > 1:
        before = messages[-2]
        if not isinstance(before, dict):
            raise invalid("every message must be an object")
        expected_tail = an_id(before.get("id"), "message id")
    answer_id = new_message_id()
    await service.runner.start(conv, answer_id, Message.user(text, id=user_id), expected_tail)
    return _stream(service, conv, answer_id, 0, announce=True)


async def get_stream(service: Service, request: Request, who: Identity) -> Response:
    """Resume the in-flight answer (from its start, or from ``Last-Event-ID``); 204 when
    none runs, and for a conversation the caller cannot see (the same answer)."""
    conv = service.conversation(request, who, request.path_params["id"])
    start: int | None = None
    raw = request.headers.get("last-event-id")
    if raw is not None:
        if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
            raise invalid("Last-Event-ID must be a text index (a non-negative integer)")
        start = int(raw)
    row = (await conv.stores.supervision.read(conv.key, conv.principal)).row
    if row is None or row.status != "running":
        return Response(status_code=204)
    return _stream(service, conv, row.message_id, start or 0, announce=start is None)


async def get_turn(service: Service, request: Request, who: Identity) -> Response:
    """Which turn is in flight: ``{"turn": null}`` or its id, epoch, status and liveness."""
    conv = service.conversation(request, who, request.path_params["id"])
    if await conv.info() is None:
        raise not_found()
    view = await conv.stores.supervision.read(conv.key, conv.principal)
    row = view.row
    if row is None:
        return JSONResponse({"turn": None})
    live = liveness(view, service.lease_config.dead_after) == "live"
    turn = {"message_id": row.message_id, "epoch": row.epoch, "status": row.status, "live": live}
    return JSONResponse({"turn": turn})


async def post_stop(service: Service, request: Request, who: Identity) -> Response:
    """Stop the in-flight turn from this replica: 200 with the message kept, 404 ``no_turn``."""
    conv = service.conversation(request, who, request.path_params["id"])
    if await conv.info() is None:
        raise not_found()
    kept = await conv.stop(lease_config=service.lease_config)
    if kept is None:
        raise ApiError(404, "no_turn", "no turn is in flight")
    return JSONResponse({"message": message_json(kept)})


__all__ = ["get_stream", "get_turn", "post_chat", "post_stop"]
