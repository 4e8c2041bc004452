"""TurnPublisher: completed turns mirrored into the conversation, idempotent and fenced."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from agentstores import ConversationKey, FencedError
from agentstores_langgraph import AgentStoresSaver, CheckpointTranscript, TurnPublisher

from .backends import Servers, fresh_tenant
from .conversations import script, scripted_graph

pytestmark = pytest.mark.timeout(120)


async def test_publish_mirrors_each_turn_once(backend: str, lg_servers: Servers) -> None:
    async with lg_servers.open(backend) as stores:
        tenant = fresh_tenant()
        saver = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        publisher = TurnPublisher(stores, tenant=tenant, principal="alice")
        graph = scripted_graph(saver)
        for user, reply in script(3, 3):
            config = {"configurable": {"thread_id": "t", "reply": reply}}
            result = await graph.ainvoke({"messages": [user]}, config)
            stored = await publisher.publish("t", result["messages"])
            assert [m.id for m in stored] == [user.id] + [m.id for m in reply]
            assert await publisher.publish("t", result["messages"]) == []  # a retry
        conv = stores.conversation(ConversationKey(tenant, "t"), "alice")
        first = await conv.message(0, speaker="user")
        assert first is not None and first.id == "s3-u0"
        from_checkpoints = await CheckpointTranscript(saver).get_transcript("t")
        mirrored = [m for m in await conv.messages() if "langgraph" not in m.metadata]
        assert [(m.id, m.role) for m in mirrored] == [
            (r.message_id, r.role) for r in from_checkpoints
        ]
        stamps = [m.created_at for m in mirrored]
        assert stamps == sorted(stamps)
        tool_rows = [m for m in mirrored if m.role == "tool"]
        assert tool_rows and all(m.metadata["tool_call_id"] for m in tool_rows)


async def test_a_fenced_publication_lands_nothing(backend: str, lg_servers: Servers) -> None:
    async with lg_servers.open(backend) as stores:
        tenant = fresh_tenant()
        publisher = TurnPublisher(stores, tenant=tenant, principal="alice")
        await publisher.publish("t", [HumanMessage("hi", id="u0")], epoch=3)
        with pytest.raises(FencedError):
            await publisher.publish(
                "t", [HumanMessage("hi", id="u0"), HumanMessage("late", id="u1")], epoch=2
            )
        conv = stores.conversation(ConversationKey(tenant, "t"), "alice")
        assert [m.id for m in await conv.messages()] == ["u0"]
