"""Two workers resume one thread: LangGraph's own savers let both extend it (a fork),
AgentStoresSaver refuses the worker whose lease was taken over.

The graph pauses before ``answer``; both workers resume it from the same checkpoint and
are held inside ``answer`` until the test releases them, worker B (the takeover) first.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from agentstores import ConversationKey, FencedError
from agentstores.protocol.lease import claim
from agentstores.stores.ambient import fenced_as
from agentstores_langgraph import EPOCH, AgentStoresSaver
from tests.servers.backends import Servers, fresh_tenant

from .graphs import held_chat
from .pgsaver import postgres_saver

pytestmark = pytest.mark.timeout(120)


async def resume_twice(
    saver: BaseCheckpointSaver, thread: str, run: Any
) -> tuple[str, list[BaseException | None], list[str]]:
    """Start the thread, resume it on workers a and b from one checkpoint; returns the
    parent id, each worker's outcome and the answers of the parent's children."""
    gate = {"a": asyncio.Event(), "b": asyncio.Event()}
    arrived = {"a": asyncio.Event(), "b": asyncio.Event()}
    graph = held_chat(gate, arrived).compile(checkpointer=saver, interrupt_before=["answer"])
    base = {"configurable": {"thread_id": thread}}
    await graph.ainvoke({"messages": [HumanMessage("hello", id="h-1")]}, base)
    parent = await saver.aget_tuple(base)
    assert parent is not None
    parent_id = parent.config["configurable"]["checkpoint_id"]

    async def worker(name: str) -> None:
        config = {"configurable": {"thread_id": thread, "worker": name}}
        await run(name, graph.ainvoke(None, config), config)

    task_a = asyncio.create_task(worker("a"))
    await arrival(arrived["a"], task_a)
    task_b = asyncio.create_task(worker("b"))
    await arrival(arrived["b"], task_b)
    gate["b"].set()
    outcomes: list[BaseException | None] = [None, None]
    outcomes[1] = (await asyncio.gather(task_b, return_exceptions=True))[0]
    gate["a"].set()
    outcomes[0] = (await asyncio.gather(task_a, return_exceptions=True))[0]
    answers = []
    async for t in saver.alist(base):
        if t.parent_config and t.parent_config["configurable"]["checkpoint_id"] == parent_id:
            answers.append(t.checkpoint["channel_values"]["messages"][-1].content)
    return parent_id, outcomes, sorted(answers)


async def arrival(event: asyncio.Event, task: asyncio.Task[None]) -> None:
    """Wait until the worker is held in ``answer``; a worker that fails first raises."""
    waiter = asyncio.ensure_future(event.wait())
    await asyncio.wait({waiter, task}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if not event.is_set():
        waiter.cancel()
        await task
        raise AssertionError("the worker never reached the held step")


async def plain(name: str, run: Any, config: Any) -> None:
    await run


async def test_in_memory_saver_forks() -> None:
    _, outcomes, answers = await resume_twice(InMemorySaver(), "t-1", plain)
    assert outcomes == [None, None]
    assert answers == ["answer from a", "answer from b"]


async def test_postgres_saver_forks(pg_admin: str) -> None:
    async with postgres_saver(pg_admin) as saver:
        _, outcomes, answers = await resume_twice(saver, "t-1", plain)
    assert outcomes == [None, None]
    assert answers == ["answer from a", "answer from b"]


async def test_agentstores_saver_refuses_the_taken_over_worker(
    backend: str, bridge_servers: Servers
) -> None:
    """Each worker claims the turn lease (b resumes the live turn: a new epoch) and runs
    the graph with the lease's ambient epoch; a's late checkpoint is refused whole."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        saver = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        key = ConversationKey(tenant, "t-1")
        leases: dict[str, int] = {}
        counts: dict[str, int] = {}

        async def leased(name: str, run: Any, config: Any) -> None:
            lease = await claim(stores, key, "alice", "turn-1")
            leases[name] = lease.epoch
            with fenced_as(key, lease.epoch):
                task = asyncio.ensure_future(run)
            if name == "a":
                info = await stores.conversations.get_conversation(key, "alice")
                counts["before"] = info.message_count if info else 0
            await task

        _, outcomes, answers = await resume_twice(saver, "t-1", leased)
        info = await stores.conversations.get_conversation(key, "alice")
        assert leases["b"] > leases["a"]
        assert outcomes[1] is None
        assert isinstance(outcomes[0], FencedError)
        assert answers == ["answer from b"]
        latest = await saver.aget_tuple({"configurable": {"thread_id": "t-1"}})
        assert latest is not None
        assert latest.checkpoint["channel_values"]["messages"][-1].content == "answer from b"
        assert info is not None


@pytest.mark.parametrize("epochs", [(1, 2)])
async def test_configurable_epoch_fences_without_a_lease(
    backend: str, bridge_servers: Servers, epochs: tuple[int, int]
) -> None:
    """Callers without a lease pass the epoch in ``configurable``: the same refusal."""
    async with bridge_servers.open(backend) as stores:
        saver = AgentStoresSaver(stores, tenant=fresh_tenant(), principal="alice")
        given = dict(zip("ab", epochs, strict=True))

        async def with_epoch(name: str, run: Any, config: Any) -> None:
            config["configurable"][EPOCH] = given[name]
            await run

        _, outcomes, answers = await resume_twice(saver, "t-1", with_epoch)
        assert outcomes[1] is None
        assert isinstance(outcomes[0], FencedError)
        assert answers == ["answer from b"]
