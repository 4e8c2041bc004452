"""Takeover and failure on one in-memory store: when the producing replica goes, two
replicas that follow race to take the turn over and exactly one wins (both screens end
with the whole answer); a producer that fails ends the stream with an error part."""

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
