"""A deterministic, resumable streaming agent for the two-server proof (no model needed).

It streams the cumulative answer ``w0 w1 ... w{N-1}``, one word every ``DELAY`` seconds;
its working state (how many words are out) is a resumable dependency, so a takeover
revives it from the last checkpoint and the answer is the same however often it dies.
"""

import asyncio
import os
from collections.abc import AsyncGenerator
from typing import Any

from zav.agents_sdk import (
    AgentDependencyFactory,
    AgentDependencyRegistry,
    ChatAgentClassRegistry,
    ChatMessage,
    ResumableAgentDependency,
    StreamableChatAgent,
)
from zav.agents_sdk.domain.chat_message import ChatMessageSender

WORDS = int(os.environ.get("ZAV_TEST_WORDS", "80"))
DELAY = float(os.environ.get("ZAV_TEST_DELAY", "0.1"))


def answer(words: int = WORDS) -> str:
    return " ".join(f"w{i}" for i in range(words))


class Progress(ResumableAgentDependency):
    state_key = "progress"

    def __init__(self) -> None:
        self.done = 0

    async def dump(self) -> dict[str, Any]:
        return {"done": self.done}

    async def load(self, state: dict[str, Any]) -> None:
        self.done = int(state.get("done", 0))


class ProgressFactory(AgentDependencyFactory):
    @classmethod
    def create(cls) -> Progress:
        return Progress()


AgentDependencyRegistry.register(ProgressFactory)


@ChatAgentClassRegistry.register()
class CountingAgent(StreamableChatAgent):
    agent_name = "counting"

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    async def execute_streaming(
        self, conversation: list[ChatMessage]
    ) -> AsyncGenerator[ChatMessage, None]:
        while self.progress.done < WORDS:
            await asyncio.sleep(DELAY)
            self.progress.done += 1
            yield ChatMessage(sender=ChatMessageSender.BOT, content=answer(self.progress.done))
