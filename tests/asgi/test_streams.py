"""Streams on one in-memory store: when the producing replica goes, two replicas that
follow race to take the turn over and exactly one wins (both screens end with the whole
answer); a producer that fails ends the stream with an error part; a silent producer's
stream carries keep-alive comments."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agentstores_asgi import ProduceContext, create_app

from .harness import (
    EXPECTED,
    LEASE,
    Caller,
    Replica,
    chat_body,
    check_complete,
    header_identity,
    make_app,
    read_stream,
    streaming,
    user_message,
    wait_until_idle,
)


async def test_one_replica_wins_the_takeover(memory_url: str, alice: Caller):
    a, b, c = [await Replica(make_app(memory_url)).start() for _ in range(3)]
    try:
        async with streaming(
            alice, a, "POST", "/chat", json=chat_body("c1", user_message("u1"))
        ) as r:
            first = await read_stream(r, until=2)
        assert first.last_id is not None
        resume = {"last-event-id": str(first.last_id)}
        async with (
            streaming(alice, b, "GET", "/chat/c1/stream", headers=resume) as on_b,
            streaming(alice, c, "GET", "/chat/c1/stream", headers=resume) as on_c,
        ):
            reads = asyncio.gather(
                read_stream(on_b, start=first.last_id), read_stream(on_c, start=first.last_id)
            )
            await a.stop()
            seen_b, seen_c = await reads
        for seen in (seen_b, seen_c):
            check_complete(seen, announced=False)
            assert first.text + seen.text == EXPECTED
            leases = [e.part for e in seen.events if e.part and e.part["type"] != "text-delta"]
            assert [
                p["data"]["epoch"] for p in leases if p["type"] == "data-agentstores-lease"
            ] == [2]
        turn = await wait_until_idle(alice, b, "c1")
        assert turn["epoch"] == 2 and turn["status"] == "done"  # one claim won, nobody else
    finally:
        await asyncio.gather(a.stop(), b.stop(), c.stop())


async def failing(ctx: ProduceContext) -> AsyncIterator[str]:
    yield "a start, "
    await asyncio.sleep(0.1)
    raise RuntimeError("the model went away (with a secret: sk-123)")


async def test_a_failing_producer_ends_with_an_error_part(memory_url: str, alice: Caller):
    app = create_app(memory_url, identity=header_identity, producer=failing, lease_config=LEASE)
    replica = await Replica(app).start()
    try:
        async with streaming(
            alice, replica, "POST", "/chat", json=chat_body("c1", user_message("u1"))
        ) as r:
            reading = await read_stream(r)
        assert reading.types[:2] == ["start", "text-start"]
        assert reading.types[-2:] == ["error", "[DONE]"]
        error = reading.events[-2].part
        assert error is not None and "sk-123" not in error["errorText"]
        async with alice.client(replica) as client:
            info = (await client.get("/conversations/c1")).json()
            assert info["last_turn_status"] == "errored" and info["tail_message_id"] == "u1"
            assert (await client.get("/chat/c1/turn")).json()["turn"]["status"] == "errored"
    finally:
        await replica.stop()


async def pausing(ctx: ProduceContext) -> AsyncIterator[str]:
    yield "before "
    await asyncio.sleep(0.8)
    yield "after"


async def test_silence_is_filled_with_comments(memory_url: str, alice: Caller):
    app = create_app(
        memory_url, identity=header_identity, producer=pausing, stream_every=0, keep_alive=0.1
    )
    replica = await Replica(app).start()
    try:
        async with streaming(
            alice, replica, "POST", "/chat", json=chat_body("c1", user_message("u1"))
        ) as r:
            lines = [line async for line in r.aiter_lines() if line]
        deltas = [i for i, line in enumerate(lines) if '"text-delta"' in line]
        comments = [i for i, line in enumerate(lines) if line.startswith(":")]
        assert len(deltas) == 2
        assert len([i for i in comments if deltas[0] < i < deltas[1]]) >= 2
        assert lines[-1] == "data: [DONE]"
    finally:
        await replica.stop()


async def test_regenerate_replaces_the_last_answer(
    memory_replicas: tuple[Replica, Replica], alice: Caller
):
    a, b = memory_replicas
    u1 = user_message("u1")
    async with streaming(alice, a, "POST", "/chat", json=chat_body("c1", u1)) as r:
        first = await read_stream(r)
    again = {**chat_body("c1", u1), "trigger": "regenerate-message", "messageId": first.message_id}
    async with streaming(alice, b, "POST", "/chat", json=again) as r:
        assert r.status_code == 200
        second = await read_stream(r)
    check_complete(second)
    assert second.text == EXPECTED and second.message_id != first.message_id
    async with alice.client(a) as client:
        stored = (await client.get("/conversations/c1/messages")).json()["messages"]
        assert [(m["id"], m["content"]) for m in stored] == [
            ("u1", "tell me"),
            (second.message_id, EXPECTED),
        ]
        stale = await client.post("/chat", json=again)  # the answer it names is gone
        assert stale.status_code == 409
        assert stale.json()["error"] | {"message": ""} == {
            "code": "stale",
            "message": "",
            "tail": second.message_id,
            "expected": first.message_id,
        }
        other = {**again, "messages": [user_message("u7")], "messageId": second.message_id}
        assert (await client.post("/chat", json=other)).status_code == 409
        assert (await client.get("/conversations/c1/messages")).json()["messages"] == stored
        assert (await client.get("/chat/c1/turn")).json()["turn"] is None  # claim released
