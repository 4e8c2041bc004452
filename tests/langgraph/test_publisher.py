"""TurnPublisher: completed turns mirrored into the conversation, idempotent and fenced."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from agentstores import ConversationKey, FencedError
from agentstores_langgraph import AgentStoresSaver, CheckpointTranscript, ThreadChat, TurnPublisher
from tests.servers.backends import Servers, fresh_tenant

from .conversations import script, scripted_graph

pytestmark = pytest.mark.timeout(120)


async def test_publish_mirrors_each_turn_once(backend: str, bridge_servers: Servers) -> None:
    async with bridge_servers.open(backend) as stores:
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


async def test_a_fenced_publication_lands_nothing(backend: str, bridge_servers: Servers) -> None:
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        publisher = TurnPublisher(stores, tenant=tenant, principal="alice")
        await publisher.publish("t", [HumanMessage("hi", id="u0")], epoch=3)
        with pytest.raises(FencedError):
            await publisher.publish(
                "t", [HumanMessage("hi", id="u0"), HumanMessage("late", id="u1")], epoch=2
            )
        conv = stores.conversation(ConversationKey(tenant, "t"), "alice")
        assert [m.id for m in await conv.messages()] == ["u0"]


async def test_a_chat_reads_no_checkpoint_rows(backend: str, bridge_servers: Servers) -> None:
    """The conversation store's every-speaker views hold the checkpoints (they are rows
    of the log); ThreadChat shows, counts and indexes only the chat's messages, also
    after pending writes and a copy of the thread."""
    async with bridge_servers.open(backend) as stores:
        tenant = fresh_tenant()
        saver = AgentStoresSaver(stores, tenant=tenant, principal="alice")
        publisher = TurnPublisher(stores, tenant=tenant, principal="alice")
        graph = scripted_graph(saver)
        published: list[str] = []
        for user, reply in script(5, 3):
            config = {"configurable": {"thread_id": "t", "reply": reply}}
            result = await graph.ainvoke({"messages": [user]}, config)
            published += [m.id for m in await publisher.publish("t", result["messages"])]
        key = ConversationKey(tenant, "t")
        raw = await stores.conversations.get_transcript(key, "alice")
        assert len(raw) > len(published)  # the store's own view: checkpoints included
        for thread in ("t", "copy"):
            if thread == "copy":
                await saver.acopy_thread("t", "copy")
            chat = ThreadChat(stores, ConversationKey(tenant, thread), "alice")
            rows = await chat.get_transcript()
            assert [r.id for r in rows] == published
            assert [r.index for r in rows] == list(range(len(published)))
            assert await chat.message_count() == len(published)
            last = await chat.get_transcript(index=-1)
            assert [r.id for r in last] == published[-1:]
            assert [r.id for r in await chat.get_transcript(index=len(published))] == []
            window = (rows[1].created_at, rows[-1].created_at)
            assert [r.id for r in await chat.get_transcript(time_range=window, limit=2)] == (
                [r.id for r in rows if window[0] <= r.created_at <= window[1]][:2]
            )
            assert [m.id for m in await chat.history()] == published
            users = await chat.get_transcript(speaker="user")
            assert [r.id for r in users] == [f"s5-u{t}" for t in range(3)]
        latest = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
        assert latest is not None
        await saver.aput_writes(latest.config, [("messages", "x")], "task")
        chat = ThreadChat(stores, key, "alice")
        assert await chat.message_count() == len(published)
        assert await ThreadChat(stores, key, "mallory").message_count() == 0
