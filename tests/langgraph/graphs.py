"""Small LangGraph graphs the tests run: a chat turn that can be held mid-step."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def held_chat(gate: dict[str, asyncio.Event], arrived: dict[str, asyncio.Event]) -> Any:
    """``prepare`` then ``answer``; the graph pauses before ``answer`` (interrupt), and
    ``answer`` waits on ``gate[worker]`` (the worker named in ``configurable``) after
    setting ``arrived[worker]``, so a test can hold two resumed runs mid-step."""

    async def prepare(state: ChatState) -> dict[str, Any]:
        return {"messages": []}

    async def answer(state: ChatState, config: RunnableConfig) -> dict[str, Any]:
        worker = config["configurable"]["worker"]
        arrived[worker].set()
        await gate[worker].wait()
        return {"messages": [AIMessage(f"answer from {worker}", id=f"ai-{worker}")]}

    builder = StateGraph(ChatState)
    builder.add_node("prepare", prepare)
    builder.add_node("answer", answer)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "answer")
    builder.add_edge("answer", END)
    return builder
