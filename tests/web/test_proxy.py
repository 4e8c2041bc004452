"""The demo's proxy over real loopback servers: round-robin, a pinned replica, a dead
replica skipped, and server-sent events relayed as they come (not buffered)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator

import anyio.to_thread
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from agentstores_tools.demo import PIN_HEADER, REPLICA_HEADER, create_proxy
from agentstores_tools.demo.cluster import free_port

RELEASE_TIMEOUT = 30.0
"""A failure timeout: how long the upstream waits for the test to release it."""


class Upstream:
    """A tiny app on a loopback port: ``/who`` names it, ``/sse`` sends one event, waits
    for :attr:`release`, then sends the last one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.release = threading.Event()
        self.port = free_port()

        async def who(request: Request) -> JSONResponse:
            body = (await request.body()).decode()
            return JSONResponse({"name": name, "query": request.url.query, "body": body})

        async def sse(_request: Request) -> StreamingResponse:
            async def events() -> AsyncIterator[bytes]:
                yield b"data: first\n\n"
                await anyio.to_thread.run_sync(self.release.wait, RELEASE_TIMEOUT)
                yield b"data: last\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")

        app = Starlette(routes=[Route("/who", who, methods=["GET", "POST"]), Route("/sse", sse)])
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def serve(server: uvicorn.Server, thread: threading.Thread) -> None:
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("a test server did not start")
        threading.Event().wait(0.02)


@pytest.fixture
def upstreams() -> Iterator[list[Upstream]]:
    made = [Upstream("a"), Upstream("b")]
    for upstream in made:
        serve(upstream.server, upstream.thread)
    yield made
    for upstream in made:
        upstream.release.set()
        upstream.server.should_exit = True
        upstream.thread.join(10)


@pytest.fixture
def proxy(upstreams: list[Upstream]) -> Iterator[str]:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there: a killed replica
    app = create_proxy([upstreams[0].url, dead, upstreams[1].url], names=["a", "dead", "b"])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    serve(server, thread)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_round_robin_skips_the_dead_replica_and_honours_a_pin(proxy: str) -> None:
    with httpx.Client(base_url=proxy, timeout=30) as client:
        served = [client.get("/who").headers[REPLICA_HEADER] for _ in range(6)]
        pinned = [client.get("/who", headers={PIN_HEADER: "2"}).json()["name"] for _ in range(3)]
        to_dead = client.get("/who", headers={PIN_HEADER: "1"})
        posted = client.post("/who?x=1&y=%2F", content=b"payload").json()
        page = client.get("/")
    # Turns go a, dead, b, a, dead, b: each turn of the dead one falls to the next.
    assert served == ["a", "b", "b", "a", "b", "b"]
    assert pinned == ["b", "b", "b"]
    assert to_dead.headers[REPLICA_HEADER] == "b"  # the next one after the dead
    assert posted["query"] == "x=1&y=%2F" and posted["body"] == "payload"
    assert page.status_code == 200 and "chat.js" in page.text


def test_events_are_relayed_as_they_come(proxy: str, upstreams: list[Upstream]) -> None:
    """The first event reaches the client while the upstream still holds the last one:
    only then is the upstream released."""
    with (
        httpx.Client(base_url=proxy, timeout=30) as client,
        client.stream("GET", "/sse", headers={PIN_HEADER: "0"}) as response,
    ):
        lines = response.iter_lines()
        first = next(line for line in lines if line)
        assert not upstreams[0].release.is_set()
        upstreams[0].release.set()
        rest = [line for line in lines if line]
    assert first == "data: first"
    assert rest == ["data: last"]
