"""Every refusal, on one in-memory store (the mapping is the same on every backend):
busy and stale bodies, 204 when idle, 401, bad input, and every route tried by another
principal and another tenant (404, nothing leaked, nothing written)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .harness import (
    EXPECTED,
    WAIT,
    Caller,
    Replica,
    chat_body,
    read_stream,
    sse_events,
    streaming,
    user_message,
    wait_until_idle,
)

ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/chat", chat_body("c1", user_message("x1"))),
    ("GET", "/chat/c1/turn", None),
    ("POST", "/chat/c1/stop", None),
    ("GET", "/conversations/c1", None),
    ("GET", "/conversations/c1/messages", None),
    ("PATCH", "/conversations/c1", {"title": "mine now"}),
    ("PUT", "/conversations/c1/shares/mallory", None),
    ("DELETE", "/conversations/c1/shares/carol", None),
    ("POST", "/conversations/c1/truncate", {"message_id": "u1"}),
    ("POST", "/conversations/c1/branch", {"message_id": "u1"}),
    ("DELETE", "/conversations/c1", None),
]
"""Every route naming alice's conversation (``GET /stream`` is checked on its own: 204)."""
WRITES = {("POST", "/chat"), ("POST", "/chat/c1/stop"), ("PATCH", "/conversations/c1")}
WRITES |= {("PUT", "/conversations/c1/shares/mallory"), ("DELETE", "/conversations/c1")}
WRITES |= {("DELETE", "/conversations/c1/shares/carol")}
WRITES |= {("POST", "/conversations/c1/truncate")}


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


async def answered(caller: Caller, replica: Replica, body: dict[str, Any]) -> str:
    """Run one turn to its end; return the answer's id."""
    async with streaming(caller, replica, "POST", "/chat", json=body) as r:
        assert r.status_code == 200, await r.aread()
        reading = await read_stream(r)
    assert reading.text == EXPECTED and reading.message_id is not None
    return reading.message_id


@pytest.mark.parametrize("pace", [0.05])
async def test_busy_and_stale(memory_replicas: tuple[Replica, Replica], alice: Caller):
    a, b = memory_replicas
    async with (
        alice.client(b) as client,
        streaming(alice, a, "POST", "/chat", json=chat_body("c1", user_message("u1"))) as first,
    ):
        events = sse_events(first)
        running = await read_stream(first, until=1, events=events)
        busy = await client.post(
            "/chat", json=chat_body("c1", user_message("u1"), user_message("u2"))
        )
        assert busy.status_code == 409
        error = error_of(busy)
        assert error["code"] == "busy"
        assert error["turn"] == {"message_id": running.message_id, "epoch": 1}
        await read_stream(first, reading=running, events=events)
    async with alice.client(b) as client:
        stale = await client.post("/chat", json=chat_body("c1", user_message("u3")))
        assert stale.status_code == 409
        error = error_of(stale)
        assert error["code"] == "stale"
        assert (error["tail"], error["expected"]) == (running.message_id, None)
        stale = await client.post(
            "/chat", json=chat_body("c1", user_message("u1"), user_message("u3"))
        )
        assert error_of(stale)["tail"] == running.message_id
        assert error_of(stale)["expected"] == "u1"
        # Nothing was written by the refused sends.
        stored = (await client.get("/conversations/c1/messages")).json()["messages"]
        assert [m["id"] for m in stored] == ["u1", running.message_id]


async def test_idle_stream_is_204(memory_replicas: tuple[Replica, Replica], alice: Caller):
    a, _ = memory_replicas
    async with alice.client(a) as client:
        assert (await client.get("/chat/nothing-here/stream")).status_code == 204
        no_turn = await client.get("/chat/nothing-here/turn")
        assert no_turn.status_code == 404 and error_of(no_turn)["code"] == "not_found"
    await answered(alice, a, chat_body("c1", user_message("u1")))
    async with alice.client(a) as client:
        assert (await client.get("/chat/c1/stream")).status_code == 204


async def test_no_identity_is_401(memory_replicas: tuple[Replica, Replica]):
    a, _ = memory_replicas
    async with httpx.AsyncClient(base_url=a.base, timeout=WAIT) as client:
        for method, path, body in [*ROUTES, ("GET", "/chat/c1/stream", None)]:
            response = await client.request(method, path, json=body)
            assert response.status_code == 401, (method, path)
            assert error_of(response)["code"] == "unauthenticated"
        # The identity comes from the application's resolver, never from the body.
        forged = await client.post("/chat", json={**ROUTES[0][2], "principal": "alice"})  # type: ignore[dict-item]
        assert forged.status_code == 401


@pytest.mark.parametrize("who", ["stranger", "other tenant"])
async def test_another_principal_sees_nothing_and_writes_nothing(
    memory_replicas: tuple[Replica, Replica], alice: Caller, who: str
):
    a, b = memory_replicas
    intruder = Caller(alice.tenant, "mallory") if who == "stranger" else Caller("t-other", "alice")
    answer = await answered(alice, a, chat_body("c1", user_message("u1")))
    async with alice.client(a) as client:
        assert (await client.put("/conversations/c1/shares/carol")).status_code == 204
        before = (await client.get("/conversations/c1")).json()
        transcript = (await client.get("/conversations/c1/messages")).json()
    async with intruder.client(b) as client:
        for method, path, body in ROUTES[1:]:
            response = await client.request(method, path, json=body)
            assert response.status_code == 404, (method, path, response.text)
            error = error_of(response)
            assert error["code"] == "not_found" and "alice" not in response.text, response.text
        assert (await client.get("/chat/c1/stream")).status_code == 204
        listed = (await client.get("/conversations")).json()["conversations"]
        assert "c1" not in [c["id"] for c in listed]
        method, path, body = ROUTES[0]
        if who == "stranger":  # alice's conversation: not found, nothing appended
            response = await client.request(method, path, json=body)
            assert response.status_code == 404 and error_of(response)["code"] == "not_found"
        else:  # the same id in another tenant is another conversation
            async with client.stream(method, path, json=body) as response:
                assert response.status_code == 200
                assert (await read_stream(response)).text == EXPECTED
            theirs = (await client.get("/conversations/c1/messages")).json()["messages"]
            assert theirs[0]["id"] == "x1" and len(theirs) == 2
    async with alice.client(a) as client:
        assert (await client.get("/conversations/c1")).json() == before
        assert (await client.get("/conversations/c1/messages")).json() == transcript
        turn = (await client.get("/chat/c1/turn")).json()["turn"]
        assert turn["message_id"] == answer and turn["epoch"] == 1
        mine = (await client.get("/conversations")).json()["conversations"]
        assert [c["id"] for c in mine] == ["c1"]


async def test_a_reader_it_is_shared_with_reads_but_may_not_write(
    memory_replicas: tuple[Replica, Replica], alice: Caller
):
    a, b = memory_replicas
    carol = Caller(alice.tenant, "carol")
    await answered(alice, a, chat_body("c1", user_message("u1")))
    async with alice.client(a) as client:
        assert (await client.put("/conversations/c1/shares/carol")).status_code == 204
        before = (await client.get("/conversations/c1")).json()
    async with carol.client(b) as client:
        for method, path in (("GET", "/conversations/c1"), ("GET", "/conversations/c1/messages")):
            assert (await client.request(method, path)).status_code == 200
        assert (await client.get("/chat/c1/turn")).json()["turn"]["status"] == "done"
        for method, path, body in ROUTES:
            if (method, path) not in WRITES:
                continue
            response = await client.request(method, path, json=body)
            if (method, path) == ("POST", "/chat/c1/stop"):
                assert response.status_code == 404 and error_of(response)["code"] == "no_turn"
                continue
            assert response.status_code == 403, (method, path, response.text)
            assert error_of(response)["code"] == "forbidden"
    async with alice.client(a) as client:
        after = (await client.get("/conversations/c1")).json()
        assert after == before


BAD_BODIES: list[tuple[str, Any]] = [
    ("not json", b"{nope"),
    ("not an object", b"[1, 2]"),
    ("no messages", b'{"id": "c1", "messages": []}'),
    (
        "no id",
        b'{"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "x"}]}]}',
    ),
    ("id too long", chat_body("c" * 300, user_message("u1"))),
    ("id with NUL", chat_body("c\x001", user_message("u1"))),
    ("message id empty", chat_body("c1", user_message(""))),
    ("last is not user", chat_body("c1", {**user_message("u1"), "role": "assistant"})),
    ("no text part", chat_body("c1", {**user_message("u1"), "parts": [{"type": "file"}]})),
    (
        "text not a string",
        chat_body("c1", {**user_message("u1"), "parts": [{"type": "text", "text": 1}]}),
    ),
    ("regenerate", {**chat_body("c1", user_message("u1")), "trigger": "regenerate-message"}),
    ("too large", chat_body("c1", user_message("u1", "x" * (1 << 20)))),
]


@pytest.mark.parametrize("case", [c for c, _ in BAD_BODIES])
async def test_bad_chat_bodies_are_400(
    memory_replicas: tuple[Replica, Replica], alice: Caller, case: str
):
    a, _ = memory_replicas
    body = dict(BAD_BODIES)[case]
    async with alice.client(a) as client:
        if isinstance(body, bytes):
            response = await client.post(
                "/chat", content=body, headers={"content-type": "application/json"}
            )
        else:
            response = await client.post("/chat", json=body)
        assert response.status_code == 400, response.text
        assert error_of(response)["code"] == "invalid"
        listed = (await client.get("/conversations")).json()["conversations"]
        assert listed == []  # nothing was written


async def test_bad_queries_are_400(memory_replicas: tuple[Replica, Replica], alice: Caller):
    a, _ = memory_replicas
    await answered(alice, a, chat_body("c1", user_message("u1")))
    bad = [
        ("GET", "/conversations?limit=0", None, {}),
        ("GET", "/conversations?limit=abc", None, {}),
        ("GET", "/conversations?cursor=not-a-cursor", None, {}),
        ("GET", "/conversations/c1/messages?speaker=robot", None, {}),
        ("GET", "/conversations/c1/messages?since=yesterday", None, {}),
        ("GET", "/conversations/c1/messages?start=-1", None, {}),
        ("GET", "/conversations/c1/messages?format=xml", None, {}),
        ("GET", "/chat/c1/stream", None, {"last-event-id": "abc"}),
        ("POST", "/conversations/c1/truncate", {"message_id": "u1", "cut": "sideways"}, {}),
        ("POST", "/conversations/c1/truncate", {}, {}),
        ("PATCH", "/conversations/c1", {"title": 7}, {}),
        ("PATCH", "/conversations/c1", {}, {}),
        ("POST", "/conversations/c1/branch", {"message_id": ""}, {}),
    ]
    async with alice.client(a) as client:
        for method, path, body, headers in bad:
            response = await client.request(method, path, json=body, headers=headers)
            assert response.status_code == 400, (method, path, response.text)
            assert error_of(response)["code"] == "invalid"
        assert len((await client.get("/conversations/c1/messages")).json()["messages"]) == 2


async def test_a_producer_outlives_its_client(
    memory_replicas: tuple[Replica, Replica], alice: Caller
):
    a, _ = memory_replicas
    async with streaming(alice, a, "POST", "/chat", json=chat_body("c1", user_message("u1"))) as r:
        await read_stream(r, until=1)
    await wait_until_idle(alice, a, "c1")
    async with alice.client(a) as client:
        stored = (await client.get("/conversations/c1/messages")).json()["messages"]
    assert stored[-1]["content"] == EXPECTED
