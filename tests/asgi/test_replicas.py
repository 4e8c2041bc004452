"""Two replicas over one store, on every backend: an answer streamed and stored, a client
dropped and resumed on the other replica, a stop from the other replica, and a takeover
when the producing replica goes away."""

from __future__ import annotations

import asyncio

from .harness import (
    EXPECTED,
    Caller,
    Replica,
    chat_body,
    check_complete,
    read_stream,
    sse_events,
    streaming,
    user_message,
    wait_until_idle,
)

BODY = chat_body("c1", user_message("u1"))


async def transcript(caller: Caller, replica: Replica, chat_id: str) -> list[dict]:
    async with caller.client(replica) as client:
        response = await client.get(f"/conversations/{chat_id}/messages")
        assert response.status_code == 200, response.text
        return response.json()["messages"]


async def test_answer_streams_and_is_stored(replicas: tuple[Replica, Replica], alice: Caller):
    a, b = replicas
    async with streaming(alice, a, "POST", "/chat", json=BODY) as r:
        assert r.status_code == 200
        assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert r.headers["content-type"].startswith("text/event-stream")
        reading = await read_stream(r)
    check_complete(reading)
    assert reading.text == EXPECTED
    stored = await transcript(alice, b, "c1")
    assert [(m["id"], m["role"]) for m in stored] == [
        ("u1", "user"),
        (reading.message_id, "assistant"),
    ]
    assert stored[-1]["content"] == EXPECTED
    async with alice.client(b) as client:
        assert (await client.get("/chat/c1/stream")).status_code == 204
        turn = (await client.get("/chat/c1/turn")).json()["turn"]
        assert turn["message_id"] == reading.message_id and turn["status"] == "done"


async def test_drop_then_resume_on_the_other_replica(
    replicas: tuple[Replica, Replica], alice: Caller
):
    a, b = replicas
    async with streaming(alice, a, "POST", "/chat", json=BODY) as r:
        first = await read_stream(r, until=2)  # then the connection drops
    assert first.last_id is not None and 0 < first.last_id < len(EXPECTED)
    resume = {"last-event-id": str(first.last_id)}
    async with (
        streaming(alice, b, "GET", "/chat/c1/stream") as whole,
        streaming(alice, b, "GET", "/chat/c1/stream", headers=resume) as rest,
    ):
        assert whole.status_code == 200 and rest.status_code == 200
        from_start, remainder = await asyncio.gather(
            read_stream(whole), read_stream(rest, start=first.last_id)
        )
    check_complete(from_start)
    assert from_start.message_id == first.message_id
    assert from_start.text == EXPECTED  # from the start of the message: what resume expects
    check_complete(remainder, announced=False)
    assert first.text + remainder.text == EXPECTED  # no gap, no repeat
    # The producer kept going with no client on its replica: the answer is all stored.
    await wait_until_idle(alice, b, "c1")
    assert (await transcript(alice, a, "c1"))[-1]["content"] == EXPECTED


async def test_stop_from_the_other_replica(replicas: tuple[Replica, Replica], alice: Caller):
    a, b = replicas
    async with alice.client(a) as ca, alice.client(b) as cb:
        async with ca.stream("POST", "/chat", json=BODY) as r:
            events = sse_events(r)
            reading = await read_stream(r, until=2, events=events)
            stopped = await cb.post("/chat/c1/stop")
            assert stopped.status_code == 200, stopped.text
            kept = stopped.json()["message"]
            await read_stream(r, reading=reading, events=events)
        check_complete(reading)
        assert kept["id"] == reading.message_id and kept["role"] == "assistant"
        assert reading.text == kept["content"]  # the screen shows exactly what was kept
        assert 0 < len(kept["content"]) < len(EXPECTED) and EXPECTED.startswith(kept["content"])
        info = (await cb.get("/conversations/c1")).json()
        assert info["last_turn_status"] == "cancelled" and info["tail_message_id"] == kept["id"]
        again = await cb.post("/chat/c1/stop")
        assert again.status_code == 404 and again.json()["error"]["code"] == "no_turn"
    # The producer stopped: nothing lands after the stop.
    await asyncio.sleep(0.3)
    stored = await transcript(alice, a, "c1")
    assert [m["content"] for m in stored][-1] == kept["content"] and len(stored) == 2


async def test_takeover_when_the_producing_replica_goes(
    replicas: tuple[Replica, Replica], alice: Caller
):
    a, b = replicas
    async with streaming(alice, a, "POST", "/chat", json=BODY) as r:
        first = await read_stream(r, until=2)
    await a.stop()  # its lifespan abandons the turn: no seal, the recording kept
    assert first.last_id is not None
    resume = {"last-event-id": str(first.last_id)}
    async with streaming(alice, b, "GET", "/chat/c1/stream", headers=resume) as r:
        assert r.status_code == 200
        rest = await read_stream(r, start=first.last_id)
    check_complete(rest, announced=False)
    assert first.text + rest.text == EXPECTED
    leases = [e.part for e in rest.events if e.part and e.part["type"] == "data-agentstores-lease"]
    assert len(leases) == 1 and leases[0]["data"]["epoch"] == 2 and leases[0]["transient"]
    turn = await wait_until_idle(alice, b, "c1")
    assert turn["status"] == "done" and turn["epoch"] == 2
    assert (await transcript(alice, b, "c1"))[-1]["content"] == EXPECTED
