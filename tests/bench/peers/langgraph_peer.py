"""LangGraph: a graph whose state is one ``add_messages`` channel, checkpointed by
``AsyncPostgresSaver`` (langgraph-checkpoint-postgres). A message is appended with
``aupdate_state`` (the cheapest write through the graph: no node runs) and read back
with ``aget_state``, which loads the latest checkpoint whole."""

from __future__ import annotations

import contextlib
import uuid
from importlib.metadata import version
from typing import Any

from .systems import System, postgres_bytes, text_of


def _message(n: int) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage

    return (HumanMessage if n % 2 == 0 else AIMessage)(content=text_of(n), id=f"m{n}")


class LangGraphPeer(System):
    name, server = "LangGraph PostgresSaver", "postgres"

    def __init__(self, url: str) -> None:
        self.url = url

    async def open(self) -> None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.graph import END, START, MessagesState, StateGraph

        self.version = (
            f"langgraph {version('langgraph')}, "
            f"langgraph-checkpoint-postgres {version('langgraph-checkpoint-postgres')}"
        )
        self._stack = contextlib.AsyncExitStack()
        saver = await self._stack.enter_async_context(AsyncPostgresSaver.from_conn_string(self.url))
        await saver.setup()
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {})
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
        self.graph = builder.compile(checkpointer=saver)

    async def close(self) -> None:
        await self._stack.aclose()

    async def new(self) -> Any:
        return {"configurable": {"thread_id": uuid.uuid4().hex}}

    async def build(self, conv: Any, start: int, count: int) -> None:
        # One update with every message: one checkpoint, the bulk path.
        messages = [_message(n) for n in range(start, start + count)]
        await self.graph.aupdate_state(conv, {"messages": messages}, as_node="agent")

    async def append(self, conv: Any, n: int) -> None:
        await self.graph.aupdate_state(conv, {"messages": [_message(n)]}, as_node="agent")

    async def first_user(self, conv: Any) -> str:
        from langchain_core.messages import HumanMessage

        state = await self.graph.aget_state(conv)
        return str(next(m for m in state.values["messages"] if isinstance(m, HumanMessage)).content)

    async def recent(self, conv: Any, k: int) -> int:
        state = await self.graph.aget_state(conv)
        return len(state.values["messages"][-k:])

    async def storage_bytes(self) -> int:
        return await postgres_bytes(self.url)
