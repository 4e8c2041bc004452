"""What ``za agents perf client`` does over HTTP, without its terminal UI.

Start a stateful streamed turn; recover exactly as the SDK's client does: follow the turn
(``GET /chat/stream/{id}?start_index=``), on 404 resume (``POST /chat/stream?resume=true``),
on 409 attach to the occupant; a followed stream that ends with the ``dead`` verdict is
recovered again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

TENANT = "perf"


@dataclass
class Stream:
    """One HTTP stream's answer: status, the streamed contents in order, the verdict."""

    status: int
    contents: list[str] = field(default_factory=list)
    last_index: int = -1
    reason: str | None = None
    body: str = ""
    first_event_at: float | None = None
    message_id: str | None = None
    session_id: str | None = None

    def monotonic(self) -> bool:
        """Each content extends the one before it: the stream never rolled back."""
        return all(b.startswith(a) for a, b in zip(self.contents, self.contents[1:], strict=False))


async def consume(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    user: str,
    params: dict[str, Any],
    body: dict[str, Any] | None = None,
    sink: Stream | None = None,
) -> Stream:
    """Run one request to its end (or until cancelled), filling ``sink``."""
    headers = {"requester-uuid": user}
    async with client.stream(
        method, url, params=params, json=body, headers=headers, timeout=None
    ) as resp:
        out = sink or Stream(resp.status_code)
        out.status = resp.status_code
        if resp.status_code >= 400:
            out.body = (await resp.aread()).decode("utf-8", "replace")
            return out
        event_id, event_type, data = None, None, []
        async for raw in resp.aiter_lines():
            line = raw.rstrip("\r")
            if line == "":
                if data:
                    _apply(out, event_id, event_type, "\n".join(data))
                event_id, event_type, data = None, None, []
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("event:"):
                event_type = line[6:].strip()
        return out


def _apply(out: Stream, event_id: str | None, event_type: str | None, payload: str) -> None:
    if event_type == "stream_status":
        out.reason = json.loads(payload).get("reason")
        return
    if event_type == "error":
        out.reason = "error:" + payload
        return
    if event_id and ":" in event_id:
        out.last_index = int(event_id.rsplit(":", 1)[1])
    message = json.loads(payload)
    out.message_id = message.get("message_id") or out.message_id
    out.session_id = message.get("session_id") or out.session_id
    if out.first_event_at is None:
        out.first_event_at = time.monotonic()
    out.contents.append(message.get("content") or "")


def turn_body(session_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "agent_identifier": "counting",
        "conversation": [{"sender": "user", "content": "count for me"}],
        "stateful": True,
    }
    if session_id:
        body["session_id"] = session_id
    return body


@dataclass
class Recovery:
    """How a recovery went: every stream it read, and when the dead producer was seen."""

    streams: list[Stream] = field(default_factory=list)
    detected_at: float | None = None
    resumed: Stream | None = None

    @property
    def final(self) -> str:
        for stream in reversed(self.streams):
            if stream.contents:
                return stream.contents[-1]
        return ""


async def recover(
    client: httpx.AsyncClient,
    base: str,
    *,
    user: str,
    message_id: str,
    session_id: str,
    start_index: int,
    resume: bool = True,
    attempts: int = 20,
) -> Recovery:
    """The perf client's recovery on ``base``, repeated until the turn is finished.

    ``resume=False`` is a second screen: it only follows (and re-follows), never re-drives.
    """
    out = Recovery()
    index = start_index
    for _ in range(attempts):
        follow = await consume(
            client,
            "GET",
            f"{base}/chat/stream/{message_id}",
            user=user,
            params={"tenant": TENANT, "start_index": index, "session_id": session_id},
        )
        out.streams.append(follow)
        if follow.status == 200 and follow.reason not in ("dead",):
            return out  # followed to the end (done, or live buffer drained)
        if follow.status == 200:  # the follower saw the producer die
            out.detected_at = out.detected_at or time.monotonic()
            index = follow.last_index + 1 if follow.last_index >= 0 else index
            if not resume:
                index = 0
            continue
        if follow.status == 404:
            out.detected_at = out.detected_at or time.monotonic()
            if not resume:
                index = 0
                await _sleep(0.3)
                continue
            resumed = await consume(
                client,
                "POST",
                f"{base}/chat/stream",
                user=user,
                params={"tenant": TENANT, "resume": "true", "message_id": message_id},
                body=turn_body(session_id),
            )
            out.streams.append(resumed)
            if resumed.status == 409:
                occupant = json.loads(resumed.body).get("detail", {}).get("message_id")
                attached = await consume(
                    client,
                    "GET",
                    f"{base}/chat/stream/{occupant}",
                    user=user,
                    params={"tenant": TENANT, "start_index": 0, "session_id": session_id},
                )
                out.streams.append(attached)
                return out
            out.resumed = resumed
            return out
        raise AssertionError(f"unexpected {follow.status}: {follow.body}")
    raise AssertionError("the turn never finished")


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)
