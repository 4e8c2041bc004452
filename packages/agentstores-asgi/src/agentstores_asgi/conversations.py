"""The conversation routes: list, read, retitle, share, truncate, branch, delete."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentstores import Conversation
from agentstores.models import ConversationInfo, StoredMessage, TranscriptMessage

from .context import Identity
from .errors import invalid, not_found
from .requests import a_principal, an_id, json_body, optional_str, query_int
from .service import Service
from .shapes import info_json, message_json, ui_message

SPEAKERS = ("all", "user", "assistant")
FAR_FUTURE = datetime(9999, 12, 31, tzinfo=UTC)
MAX_PAGE = 1000


async def _visible(conv: Conversation) -> ConversationInfo:
    """The conversation's metadata, or 404 (absent and not visible look the same)."""
    info = await conv.info()
    if info is None:
        raise not_found()
    return info


def _conv(service: Service, request: Request, who: Identity) -> Conversation:
    return service.conversation(request, who, request.path_params["id"])


async def list_conversations(service: Service, request: Request, who: Identity) -> Response:
    """The caller's conversations, newest first: ``?limit=`` (1..1000) and ``?cursor=``."""
    limit = query_int(request, "limit", 50, low=1, high=MAX_PAGE)
    assert limit is not None
    cursor = request.query_params.get("cursor") or None
    page = await service.stores.conversations.list_conversations(
        who.tenant, who.principal, limit=limit, cursor=cursor
    )
    items = [info_json(info) for info in page.items]
    return JSONResponse({"conversations": items, "next_cursor": page.next_cursor})


async def get_conversation(service: Service, request: Request, who: Identity) -> Response:
    """One conversation's metadata."""
    info = await _visible(_conv(service, request, who))
    body = info_json(info)
    if info.owner == who.principal:
        body["shared_with"] = sorted(info.shared_with)
    return JSONResponse(body)


def _since(request: Request) -> datetime | None:
    raw = request.query_params.get("since")
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise invalid("since must be an ISO 8601 date-time") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def get_messages(service: Service, request: Request, who: Identity) -> Response:
    """The transcript: ``?start=`` (position in the speaker's view), ``?limit=``,
    ``?speaker=all|user|assistant``, ``?since=`` (ISO date-time, store clock) and
    ``?format=ui`` for AI SDK UIMessages."""
    conv = _conv(service, request, who)
    start = query_int(request, "start", 0) or 0
    limit = query_int(request, "limit", None, high=100_000)
    speaker = request.query_params.get("speaker", "all")
    if speaker not in SPEAKERS:
        raise invalid(f"speaker must be one of {', '.join(SPEAKERS)}")
    form = request.query_params.get("format", "json")
    if form not in ("json", "ui"):
        raise invalid("format must be json or ui")
    since = _since(request)
    await _visible(conv)
    rows: list[StoredMessage] | list[TranscriptMessage]
    if speaker == "all" and since is None:
        rows = await conv.messages(start=start, limit=limit)
    else:
        window = (since, FAR_FUTURE) if since is not None else None
        found = await conv.transcript(time_range=window, speaker=speaker)  # type: ignore[arg-type]
        found = [m for m in found if m.index >= start]
        rows = found[:limit] if limit is not None else found
    if form == "ui":
        shown = [ui for ui in (ui_message(m) for m in rows) if ui is not None]
        return JSONResponse({"messages": shown})
    return JSONResponse({"messages": [message_json(m) for m in rows]})


async def patch_conversation(service: Service, request: Request, who: Identity) -> Response:
    """Set or clear the title: ``{"title": str | null}``."""
    conv = _conv(service, request, who)
    body = await json_body(request, service.max_body_bytes)
    if "title" not in body:
        raise invalid("nothing to change: send a title")
    await conv.set_title(optional_str(body, "title"))
    return JSONResponse(info_json(await _visible(conv)))


async def put_share(service: Service, request: Request, who: Identity) -> Response:
    """Let a principal read the conversation (owner only)."""
    conv = _conv(service, request, who)
    await conv.share(a_principal(request.path_params["principal"]))
    return Response(status_code=204)


async def delete_share(service: Service, request: Request, who: Identity) -> Response:
    """Take a principal's read access away (owner only)."""
    conv = _conv(service, request, who)
    await conv.unshare(a_principal(request.path_params["principal"]))
    return Response(status_code=204)


async def post_truncate(service: Service, request: Request, who: Identity) -> Response:
    """Cut the transcript: ``{"message_id", "cut"?, "expected_tail"?}``."""
    conv = _conv(service, request, who)
    body = await json_body(request, service.max_body_bytes)
    message_id = an_id(body.get("message_id"), "message_id")
    cut = body.get("cut", "by_role")
    if cut not in ("by_role", "before", "after"):
        raise invalid("cut must be by_role, before or after")
    tail = optional_str(body, "expected_tail")
    removed = await conv.truncate(message_id, cut=cut, expected_tail=tail)
    return JSONResponse({"removed": removed})


async def post_branch(service: Service, request: Request, who: Identity) -> Response:
    """A new conversation holding the prefix up to ``{"message_id"}``: 201 with its id."""
    conv = _conv(service, request, who)
    body = await json_body(request, service.max_body_bytes)
    message_id = an_id(body.get("message_id"), "message_id")
    await _visible(conv)
    branch = await conv.branch(message_id)
    return JSONResponse({"id": branch.key.session_id}, status_code=201)


async def delete_conversation(service: Service, request: Request, who: Identity) -> Response:
    """Erase the conversation everywhere (owner only): 204, or 404 when there was none."""
    conv = _conv(service, request, who)
    if not await conv.delete():
        raise not_found()
    return Response(status_code=204)


__all__ = [
    "delete_conversation",
    "delete_share",
    "get_conversation",
    "get_messages",
    "list_conversations",
    "patch_conversation",
    "post_branch",
    "post_truncate",
    "put_share",
]
