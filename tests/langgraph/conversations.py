"""Generated conversations, run through a real LangGraph graph onto a saver.

Each turn is one ``ainvoke``: the user's message goes in as input, and the scripted
reply (system notes, assistant tool calls, tool results, multimodal blocks, blank
answers, messages with no text) is appended by the graph's one node, so every turn
writes several checkpoints, each with its own ``ts``.
"""

from __future__ import annotations

import random
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from .graphs import ChatState


def _content(rng: random.Random, n: int) -> Any:
    pick = rng.random()
    if pick < 0.6:
        return f"text {n} " + "word " * rng.randint(0, 3)
    if pick < 0.7:
        return "   "  # blank: a transcript row, never a rehydrated turn
    blocks: list[Any] = [{"type": "text", "text": f"block {n}"}]
    if rng.random() < 0.5:
        blocks.append({"type": "image_url", "image_url": {"url": "https://example.invalid/x.png"}})
    if rng.random() < 0.3:
        blocks.append(f" plain {n}")
    return blocks


def script(seed: int, turns: int) -> list[tuple[HumanMessage, list[BaseMessage]]]:
    """``turns`` (user message, reply messages) pairs drawn from ``seed``."""
    rng = random.Random(seed)
    out: list[tuple[HumanMessage, list[BaseMessage]]] = []
    n = 0
    for t in range(turns):
        n += 1
        user = HumanMessage(_content(rng, n), id=f"s{seed}-u{t}")
        reply: list[BaseMessage] = []
        if t == 0 or rng.random() < 0.3:
            reply.append(SystemMessage(f"note {t}", id=f"s{seed}-sys{t}"))
        if t == 1 or rng.random() < 0.5:
            call = {"name": "lookup", "args": {"q": t}, "id": f"call-{seed}-{t}"}
            reply.append(AIMessage("", tool_calls=[call], id=f"s{seed}-ai{t}-call"))
            reply.append(ToolMessage(f"result {t}", tool_call_id=call["id"], id=f"s{seed}-tool{t}"))
        n += 1
        reply.append(AIMessage(_content(rng, n), id=f"s{seed}-ai{t}"))
        out.append((user, reply))
    return out


def scripted_graph(saver: BaseCheckpointSaver) -> Any:
    async def respond(state: ChatState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": list(config["configurable"]["reply"])}

    async def settle(state: ChatState) -> dict[str, Any]:
        return {"messages": []}

    builder = StateGraph(ChatState)
    builder.add_node("respond", respond)
    builder.add_node("settle", settle)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", "settle")
    builder.add_edge("settle", END)
    return builder.compile(checkpointer=saver)


async def run_conversation(
    saver: BaseCheckpointSaver, thread: str, seed: int, turns: int, **configurable: Any
) -> None:
    graph = scripted_graph(saver)
    for user, reply in script(seed, turns):
        config = {"configurable": {"thread_id": thread, "reply": reply, **configurable}}
        await graph.ainvoke({"messages": [user]}, config)
