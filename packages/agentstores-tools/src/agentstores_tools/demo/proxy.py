"""The demo's front door: serves the chat page and forwards every other request to the
replicas, round-robin, streaming each answer through as it arrives (no buffering, so the
UI message stream's server-sent events reach the page one by one).

A replica that refuses the connection (killed) is skipped for the next one, so a page
that reconnects lands on a live replica. A request may pin a replica with the
``x-demo-replica`` header (the page's ``?via=N``), which the demo uses to show a second
tab following through the other replica. Every answer carries ``x-agentstores-replica``:
the replica that served it.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib import resources

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

REPLICA_HEADER = "x-agentstores-replica"
"""Which replica served a request (set on every forwarded answer)."""
PIN_HEADER = "x-demo-replica"
"""A request's wish for one replica, by index (0, 1, ...); a dead one is skipped."""
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}
)
"""Headers that belong to one connection, never forwarded (RFC 9110, 7.6.1)."""
PAGE_FILES = {"/": ("index.html", "text/html"), "/chat.js": ("chat.js", "text/javascript")}


def _page(name: str) -> bytes:
    return resources.files(__package__).joinpath("page", name).read_bytes()


class RoundRobin:
    """The replicas' base URLs, each request the next one (or the pinned one first)."""

    def __init__(self, upstreams: Sequence[str]) -> None:
        if not upstreams:
            raise ValueError("the proxy needs at least one replica")
        self.upstreams = list(upstreams)
        self._turns = itertools.count()

    def order(self, pin: int | None) -> list[int]:
        """The replicas to try for one request, in order: each one once."""
        count = len(self.upstreams)
        first = pin % count if pin is not None else next(self._turns) % count
        return [(first + step) % count for step in range(count)]


def create_proxy(upstreams: Sequence[str], *, names: Sequence[str] | None = None) -> Starlette:
    """The proxy app over ``upstreams`` (base URLs); ``names`` label them in
    ``x-agentstores-replica`` (default ``replica-1``, ``replica-2``, ...)."""
    pool = RoundRobin(upstreams)
    labels = list(names) if names else [f"replica-{i + 1}" for i in range(len(upstreams))]
    client = httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None))

    async def page(request: Request) -> Response:
        name, media_type = PAGE_FILES[request.url.path]
        return Response(_page(name), media_type=media_type, headers={"cache-control": "no-store"})

    async def forward(request: Request) -> Response:
        body = await request.body()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        pin_text = request.headers.get(PIN_HEADER, "")
        pin = int(pin_text) if pin_text.isdigit() else None
        path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.scope.get("query_string", b"")
        suffix = path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        for index in pool.order(pin):
            target = pool.upstreams[index] + suffix
            upstream_request = client.build_request(
                request.method, target, headers=headers, content=body
            )
            try:
                upstream = await client.send(upstream_request, stream=True)
            except httpx.TransportError:
                continue  # a dead replica: the next one
            out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
            for own in ("content-length", "date", "server"):  # uvicorn sets its own
                out_headers.pop(own, None)
            out_headers[REPLICA_HEADER] = labels[index]
            return StreamingResponse(
                _relay(upstream), status_code=upstream.status_code, headers=out_headers
            )
        return JSONResponse(
            {"error": {"code": "unavailable", "message": "no replica answered"}}, status_code=502
        )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await client.aclose()

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    routes = [Route(path, page, methods=["GET"]) for path in PAGE_FILES]
    routes.append(Route("/{path:path}", forward, methods=methods))
    return Starlette(routes=routes, lifespan=lifespan)


async def _relay(upstream: httpx.Response) -> AsyncIterator[bytes]:
    """The upstream body as it arrives; a replica dying mid-answer ends it early (the page
    sees the stream cut and resumes). Closed with the page's connection, it closes the
    replica's, so the replica sees the page go."""
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    except httpx.TransportError:
        return
    finally:
        await upstream.aclose()
