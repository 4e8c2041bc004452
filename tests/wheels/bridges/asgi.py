"""The installed agentstores-asgi wheel, driven as a plain ASGI application over memory://
(run in a clean venv: core's wheel, the app's wheel and Starlette only; no HTTP client).

A chat turn is started and its UI message stream read to the end; the stored transcript
holds the answer; another principal gets 404 and no identity 401. Exits 0."""

from __future__ import annotations

import asyncio
import json
import uuid
import warnings
from collections.abc import AsyncIterator
from typing import Any

from agentstores import open_stores
from agentstores_asgi import Identity, ProduceContext, create_app

warnings.filterwarnings("ignore", message=".*IN-MEMORY.*")


async def identity(request: Any) -> Identity | None:
    user = request.headers.get("x-user")
    return Identity("acme", user) if user else None


async def producer(ctx: ProduceContext) -> AsyncIterator[str]:
    for word in ("hello", " from", " the", " wheel"):
        yield word


async def call(app: Any, method: str, path: str, user: str | None, body: Any = None) -> Any:
    """One request through the app: (status, headers, body bytes)."""
    headers = [(b"content-type", b"application/json")]
    if user is not None:
        headers.append((b"x-user", user.encode()))
    payload = b"" if body is None else json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    delivered = False
    finished = asyncio.Event()
    status: list[int] = []
    response_headers: dict[bytes, bytes] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
            response_headers.update(dict(message.get("headers", [])))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    await asyncio.wait_for(app(scope, receive, send), 30)
    return status[0], response_headers, b"".join(chunks)


async def main() -> None:
    async with open_stores(f"memory://wheels-{uuid.uuid4().hex}") as stores:
        app = create_app(stores, identity=identity, producer=producer, stream_every=0)
        chat = uuid.uuid4().hex
        user_message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
        body = {"id": chat, "messages": [user_message], "trigger": "submit-message"}
        status, headers, stream = await call(app, "POST", "/chat", "alice", body)
        assert status == 200, (status, stream)
        assert headers.get(b"x-vercel-ai-ui-message-stream") == b"v1", headers
        parts = [
            json.loads(line[len("data: ") :])
            for line in stream.decode().splitlines()
            if line.startswith("data: {")
        ]
        text = "".join(p["delta"] for p in parts if p["type"] == "text-delta")
        assert text == "hello from the wheel", parts
        assert parts[0]["type"] == "start" and parts[-1]["type"] == "finish", parts
        status, _, listed = await call(app, "GET", f"/conversations/{chat}/messages", "alice")
        assert status == 200, listed
        assert "hello from the wheel" in listed.decode(), listed
        status, _, refused = await call(app, "GET", f"/conversations/{chat}/messages", "mallory")
        assert status == 404 and json.loads(refused)["error"]["code"] == "not_found", refused
        status, _, _ = await call(app, "GET", "/conversations", None)
        assert status == 401, status


asyncio.run(main())
print("agentstores-asgi wheel: ok")
