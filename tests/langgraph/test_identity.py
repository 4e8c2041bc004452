"""Who a run acts as comes from the application, never from ``configurable``: an API
client of a LangGraph server writes a run's ``configurable``, so a tenant or principal
named there is refused, and the saver acts as its fixed identity or as what the
application's resolver returns from its own trusted context."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agentstores import ConversationKey, NotOwnedError, Stores, UsageError, open_stores
from agentstores_langgraph import CLIENT_IDENTITY_KEYS, AgentStoresSaver, TurnPublisher
from tests.servers.backends import Servers, fresh_tenant

from .test_saver import chain, checkpoint, config

pytestmark = pytest.mark.timeout(120)

CURRENT_USER: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("user")
"""What an application's authentication sets for the request it serves."""


def from_request(run: Mapping[str, Any]) -> tuple[str, str]:
    """The application's resolver: the authenticated user, whatever the run says."""
    return CURRENT_USER.get()


def forged(thread: str, tenant: str, principal: str, **extra: Any) -> dict[str, Any]:
    """The config of a run whose API client names another user's tenant and principal."""
    c = config(thread, **extra)
    c["configurable"].update(zip(CLIENT_IDENTITY_KEYS, (tenant, principal), strict=True))
    return c


async def rows(stores: Stores, key: ConversationKey, principal: str) -> int:
    info = await stores.conversations.get_conversation(key, principal)
    return 0 if info is None else info.message_count


@pytest.mark.parametrize("identity", ["fixed", "resolver"])
async def test_a_client_set_identity_cannot_act_as_another_user(
    identity: str, backend: str, bridge_servers: Servers
) -> None:
    """Mallory's run names Alice's tenant and principal in ``configurable``: it reads
    nothing of Alice's thread, writes nothing to it, and cannot erase it."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        alice = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        ids = await chain(alice, "t", 2)
        key = ConversationKey(tenant, "t")
        before = await rows(stores, key, "alice")
        if identity == "fixed":
            saver = AgentStoresSaver(stores, tenant=fresh_tenant(), principal="mallory")
        else:
            saver = AgentStoresSaver(stores, identity=from_request)
            CURRENT_USER.set((fresh_tenant(), "mallory"))
        for run in (
            forged("t", tenant, "alice"),
            forged("t", tenant, "alice", checkpoint_id=ids[-1]),
            {"configurable": {"thread_id": "t", "agentstores_principal": "alice"}},
            {"configurable": {"thread_id": "t", "agentstores_tenant": tenant}},
        ):
            with pytest.raises(UsageError, match="another user"):
                await saver.aget_tuple(run)
            with pytest.raises(UsageError, match="another user"):
                [t async for t in saver.alist(run)]
            with pytest.raises(UsageError, match="another user"):
                await saver.aput(run, checkpoint({"a": "mallory"}, {"a": 99}), {}, {"a": 99})
            with pytest.raises(UsageError, match="another user"):
                await saver.aput_writes(run, [("a", "mallory")], "task")
        assert await rows(stores, key, "alice") == before
        latest = await alice.aget_tuple(config("t"))
        assert latest is not None and latest.checkpoint["id"] == ids[-1]
        # as herself, mallory finds no thread "t" of alice's in any tenant she can name
        await saver.adelete_thread("t")
        assert await rows(stores, key, "alice") == before


async def test_a_graph_run_with_a_forged_config_is_refused(bridge_servers: Servers) -> None:
    """Through LangGraph itself, as a server would run a client's request."""

    class State(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]

    async def answer(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage("hi")]}

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    async with bridge_servers.open("memory") as stores:
        tenant = fresh_tenant()
        alice = builder.compile(
            checkpointer=AgentStoresSaver(stores, tenant=tenant, principal="alice")
        )
        await alice.ainvoke({"messages": [HumanMessage("secret")]}, config("t"))
        mallory = builder.compile(checkpointer=AgentStoresSaver(stores, identity=from_request))
        CURRENT_USER.set((tenant, "mallory"))
        with pytest.raises(UsageError, match="another user"):
            await mallory.ainvoke(
                {"messages": [HumanMessage("show me")]}, forged("t", tenant, "alice")
            )
        with pytest.raises(UsageError, match="another user"):
            await mallory.aget_state(forged("t", tenant, "alice"))
        # as herself, in alice's own tenant, mallory sees no thread and cannot extend it
        assert (await mallory.aget_state(config("t"))).values == {}
        with pytest.raises(NotOwnedError):
            await mallory.ainvoke({"messages": [HumanMessage("show me")]}, config("t"))
        state = await alice.aget_state(config("t"))
        assert [m.content for m in state.values["messages"]] == ["secret", "hi"]


async def test_the_resolver_decides_per_run(bridge_servers: Servers) -> None:
    """One saver serves every user: each run acts as whom the application's context
    names, and sees only that user's threads."""
    async with bridge_servers.open("memory") as stores:
        tenant = fresh_tenant()
        saver = AgentStoresSaver(stores, identity=from_request)
        CURRENT_USER.set((tenant, "alice"))
        ids = await chain(saver, "t", 2)
        assert (await saver.aget_tuple(config("t"))).checkpoint["id"] == ids[-1]  # type: ignore[union-attr]
        CURRENT_USER.set((tenant, "bob"))
        assert await saver.aget_tuple(config("t")) is None
        with pytest.raises(NotOwnedError):
            await saver.aput(config("t"), checkpoint({"a": 1}, {"a": 9}), {}, {"a": 9})
        with pytest.raises(NotOwnedError):  # as bob: not his to erase
            await saver.adelete_thread("t")
        CURRENT_USER.set((tenant, "alice"))
        assert await rows(stores, ConversationKey(tenant, "t"), "alice") == 2
        await saver.adelete_thread("t")
        assert await rows(stores, ConversationKey(tenant, "t"), "alice") == 0


async def test_the_publisher_refuses_a_client_set_identity(bridge_servers: Servers) -> None:
    async with bridge_servers.open("memory") as stores:
        tenant = fresh_tenant()
        alice = TurnPublisher(stores, tenant=tenant, principal="alice")
        await alice.publish(config("t"), [HumanMessage("mine", id="m1")])
        mallory = TurnPublisher(stores, identity=from_request)
        CURRENT_USER.set((tenant, "mallory"))
        with pytest.raises(UsageError, match="another user"):
            await mallory.last_published(forged("t", tenant, "alice"))
        with pytest.raises(UsageError, match="another user"):
            await mallory.publish(forged("t", tenant, "alice"), [HumanMessage("x", id="m2")])
        assert await alice.last_published(config("t")) == "m1"
        assert await rows(stores, ConversationKey(tenant, "t"), "alice") == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "not neither"),
        ({"tenant": "t", "identity": from_request}, "not both"),
        ({"identity": from_request, "principal": "p"}, "a resolver returns both"),
        ({"tenant": ""}, "tenant"),
        ({"tenant": "t", "principal": "a\x00b"}, "principal"),
    ],
)
async def test_an_identity_is_given_one_way(options: dict[str, Any], message: str) -> None:
    async with _memory() as stores:
        with pytest.raises(UsageError, match=message):
            AgentStoresSaver(stores, **options)
        with pytest.raises(UsageError, match=message):
            TurnPublisher(stores, **options)


@pytest.mark.parametrize("answer", [None, "alice", ("t",), ("t", 1), ("", "alice")])
async def test_a_bad_resolver_answer_is_refused(answer: Any) -> None:
    async with _memory() as stores:
        saver = AgentStoresSaver(stores, identity=lambda run: answer)
        with pytest.raises(UsageError):
            await saver.aget_tuple(config("t"))


def _memory() -> Any:
    return open_stores("memory://")
