"""Turns under the conversation's lease on every backend: a second replica's turn is
refused (``BusyError`` naming the running turn) before it reads or writes anything, and a
takeover fences the old producer: its ``add_items``, ``pop_item`` and ``clear_session``
raise ``FencedError`` and change nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents.testing import ModelStep, assistant_message

from agentstores import BusyError, FencedError, LeaseLostError
from agentstores_openai_agents import AgentStoresSession, run_turn
from tests.servers.backends import Servers, fresh_tenant

from .support import script_turn, two_agents

pytestmark = pytest.mark.timeout(120)

U1, A1 = {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}


def replicas(stores: Any) -> tuple[AgentStoresSession, AgentStoresSession]:
    """One user's session as two replicas of a service each hold it."""
    tenant = fresh_tenant()
    return (
        AgentStoresSession("chat", stores, tenant=tenant, principal="alice"),
        AgentStoresSession("chat", stores, tenant=tenant, principal="alice"),
    )


async def test_a_second_turn_is_refused_busy(backend: str, bridge_servers: Servers) -> None:
    async with bridge_servers.open(backend) as stores:
        a, b = replicas(stores)
        async with a.turn("turn-1"):
            await a.add_items([U1])
            with pytest.raises(BusyError) as refused:
                async with b.turn("turn-2"):
                    raise AssertionError("entered a busy session")
            assert refused.value.occupant == "turn-1"
            await a.add_items([A1])
        async with b.turn("turn-2"):
            await b.add_items([U1])
        assert await a.get_items() == [U1, A1, U1]


async def test_concurrent_run_turns_do_not_interleave(
    backend: str, bridge_servers: Servers
) -> None:
    """Two replicas run a turn on one session at once: one runs, the other is refused
    before its input is stored; the history holds one whole turn."""
    async with bridge_servers.open(backend) as stores:
        a, b = replicas(stores)
        agent, model = two_agents()
        started, go = asyncio.Event(), asyncio.Event()

        async def slow(call: Any) -> Any:
            started.set()
            await go.wait()
            return [assistant_message("a1", item_id="msg_a")]

        model.enqueue(ModelStep.respond(slow))
        first = asyncio.ensure_future(run_turn(a, agent, "q1"))
        await started.wait()
        with pytest.raises(BusyError):
            await run_turn(b, agent, "q2")
        go.set()
        assert (await first).final_output == "a1"
        items = await a.get_items()
        assert items[0].get("content") == "q1" and len(items) == 2
        script_turn(model, 2)
        assert (await run_turn(b, agent, "q2")).final_output == "answer 2"


async def test_a_takeover_fences_the_old_producer(backend: str, bridge_servers: Servers) -> None:
    """Replica B retries turn-1 (the same turn id: a takeover); replica A, still running
    it, can no longer add, pop or clear, and its session is unchanged by the attempts."""
    async with bridge_servers.open(backend) as stores:
        a, b = replicas(stores)
        entered, taken = asyncio.Event(), asyncio.Event()

        async def replica_a() -> None:
            async with a.turn("turn-1"):
                await a.add_items([U1])
                entered.set()
                await taken.wait()
                for write in (a.add_items([A1]), a.pop_item(), a.clear_session()):
                    with pytest.raises(FencedError):
                        await write

        task = asyncio.ensure_future(replica_a())
        await entered.wait()
        async with b.turn("turn-1") as turn:
            assert turn.reason == "resume"
            taken.set()
            with pytest.raises((LeaseLostError, FencedError)):
                await task  # A's turn cannot end as done either
            await b.add_items([{"role": "assistant", "content": "b1"}])
        assert await b.get_items() == [U1, {"role": "assistant", "content": "b1"}]


async def test_run_turn_of_a_fenced_producer_stores_nothing(
    backend: str, bridge_servers: Servers
) -> None:
    """A's ``run_turn`` waits on its model while B takes the turn over and answers; A's
    answer is refused (or its run stopped when its heartbeat learns of the takeover)."""
    async with bridge_servers.open(backend) as stores:
        a, b = replicas(stores)
        agent, model = two_agents()
        started, go = asyncio.Event(), asyncio.Event()

        async def slow(call: Any) -> Any:
            started.set()
            await go.wait()
            return [assistant_message("stale", item_id="msg_stale")]

        model.enqueue(ModelStep.respond(slow))
        first = asyncio.ensure_future(run_turn(a, agent, "q1", message_id="req-1"))
        await started.wait()
        model.enqueue([assistant_message("fresh", item_id="msg_fresh")])
        assert (await run_turn(b, agent, "q1", message_id="req-1")).final_output == "fresh"
        go.set()
        with pytest.raises((FencedError, LeaseLostError)):
            await first
        contents = [str(i.get("content")) for i in await a.get_items()]
        assert not any("stale" in c for c in contents)
        assert any("fresh" in c for c in contents)
