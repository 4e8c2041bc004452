"""Replicas for the web-surface tests: the app served by real uvicorn servers on loopback
ports in the test's event loop, a client per replica, and an SSE reader."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request

from agentstores.protocol import LeaseConfig
from agentstores_asgi import Identity, create_app
from agentstores_asgi.demo import answer_text, slow_producer

WAIT = 60.0
"""Deadline of one step (seconds): reaching it fails the test, a slow run never does."""
WORDS = 40
PACE = 0.02
LEASE = LeaseConfig(dead_after=1.0, heartbeat_interval=0.25)
EXPECTED = answer_text("", WORDS)
"""What the test producer answers, whatever the question."""


async def header_identity(request: Request) -> Identity | None:
    """The tests' "auth": tenant and user from headers."""
    user = request.headers.get("x-user")
    tenant = request.headers.get("x-tenant")
    return Identity(tenant, user) if user and tenant else None


def make_app(url: str, *, words: int = WORDS, pace: float = PACE) -> Starlette:
    return create_app(
        url,
        identity=header_identity,
        producer=slow_producer(words, pace),
        lease_config=LEASE,
        stream_every=0.05,
        follow_poll=0.05,
        follow_safety_poll=0.5,
    )


class Replica:
    """One app instance served by uvicorn on a loopback port."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.server: uvicorn.Server | None = None
        self.task: asyncio.Task[None] | None = None
        self.base = ""

    async def start(self) -> Replica:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self.app, lifespan="on", log_level="warning", timeout_graceful_shutdown=2
        )
        self.server = uvicorn.Server(config)
        self.task = asyncio.create_task(self.server.serve(sockets=[sock]))
        async with asyncio.timeout(WAIT):
            while not self.server.started:
                if self.task.done():
                    self.task.result()
                await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        """Shut down (the lifespan hands this replica's turns over)."""
        if self.server is None or self.task is None:
            return
        self.server.should_exit = True
        await asyncio.wait_for(self.task, WAIT)
        self.server = None


@dataclass
class Caller:
    """One principal of one tenant, talking to the replicas."""

    tenant: str
    user: str
    headers: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.headers = {"x-tenant": self.tenant, "x-user": self.user}

    def client(self, replica: Replica) -> httpx.AsyncClient:
        timeout = httpx.Timeout(WAIT)
        return httpx.AsyncClient(base_url=replica.base, headers=self.headers, timeout=timeout)


@contextlib.asynccontextmanager
async def streaming(
    caller: Caller, replica: Replica, method: str, path: str, **kw: Any
) -> AsyncIterator[httpx.Response]:
    """A streamed request to ``replica`` as ``caller``; closing it drops the connection."""
    async with caller.client(replica) as client, client.stream(method, path, **kw) as response:
        yield response


def user_message(message_id: str, text: str = "tell me") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def chat_body(chat_id: str, *messages: dict[str, Any]) -> dict[str, Any]:
    return {"id": chat_id, "messages": list(messages), "trigger": "submit-message"}


@dataclass(frozen=True)
class Event:
    """One server-sent event: its id (if any) and its data (a part, or ``[DONE]``)."""

    id: str | None
    data: str

    @property
    def part(self) -> dict[str, Any] | None:
        return None if self.data == "[DONE]" else json.loads(self.data)


async def sse_events(response: httpx.Response) -> AsyncIterator[Event]:
    """The events of an SSE response, parsed line by line (comments skipped)."""
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield Event(event_id, "\n".join(data))
            event_id, data = None, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "id":
                event_id = value
    if data:
        yield Event(event_id, "\n".join(data))


@dataclass
class Reading:
    """What a client assembled from a UI message stream."""

    events: list[Event] = field(default_factory=list)
    text: str = ""
    last_id: int | None = None

    @property
    def types(self) -> list[str]:
        return [e.part["type"] if e.part is not None else "[DONE]" for e in self.events]

    @property
    def message_id(self) -> str | None:
        for e in self.events:
            if e.part is not None and e.part["type"] == "start":
                return str(e.part["messageId"])
        return None

    def take(self, event: Event, start: int = 0) -> None:
        """Add ``event``; a text event's id must be the text's length after it."""
        self.events.append(event)
        part = event.part
        if part is not None and part["type"] == "text-delta":
            self.text += part["delta"]
            assert event.id is not None and int(event.id) == start + len(self.text), event
            self.last_id = int(event.id)


async def read_stream(
    response: httpx.Response,
    *,
    start: int = 0,
    until: int | None = None,
    reading: Reading | None = None,
    events: AsyncIterator[Event] | None = None,
) -> Reading:
    """Read a UI message stream to its end, or until ``until`` text events came (pass
    ``reading`` and ``events`` back to go on with the same stream)."""
    reading = Reading() if reading is None else reading
    events = sse_events(response) if events is None else events
    deltas = 0
    async with asyncio.timeout(WAIT):
        async for event in events:
            reading.take(event, start)
            if event.part is not None and event.part["type"] == "text-delta":
                deltas += 1
                if until is not None and deltas >= until:
                    break
    return reading


def check_complete(reading: Reading, *, announced: bool = True) -> None:
    """A whole stream: start, text-start, deltas, text-end, finish, [DONE]."""
    types = reading.types
    head = ["start", "text-start"] if announced else []
    assert types[: len(head)] == head, types
    assert types[-3:] == ["text-end", "finish", "[DONE]"], types
    middle = set(types[len(head) : -3])
    assert middle <= {"text-delta", "data-agentstores-lease"}, types


async def wait_until_idle(caller: Caller, replica: Replica, chat_id: str) -> dict[str, Any]:
    """Poll /turn until the turn is sealed; return it."""
    async with caller.client(replica) as client, asyncio.timeout(WAIT):
        while True:
            turn = (await client.get(f"/chat/{chat_id}/turn")).json()["turn"]
            if turn is not None and turn["status"] != "running":
                return turn
            await asyncio.sleep(0.05)
