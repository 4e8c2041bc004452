"""A real ADK agent on a scripted model: canned ``LlmResponse``s, never a network call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field

APP = "shop"


class ScriptedLlm(BaseLlm):
    """Answers each call with the next response of ``script`` (after ``delay`` seconds);
    records the contents it was sent."""

    script: list[LlmResponse]
    delay: float = 0.0
    seen: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(list(llm_request.contents))
        if self.delay:
            await asyncio.sleep(self.delay)
        yield self.script.pop(0)


def usage(prompt: int, answer: int) -> types.GenerateContentResponseUsageMetadata:
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt, candidates_token_count=answer, total_token_count=prompt + answer
    )


def lookup_order(order_id: str, tool_context: ToolContext) -> dict[str, Any]:
    """Look an order up (records what it saw in every state scope)."""
    tool_context.state["last_order"] = order_id
    tool_context.state["user:orders_seen"] = tool_context.state.get("user:orders_seen", 0) + 1
    tool_context.state["app:lookups"] = tool_context.state.get("app:lookups", 0) + 1
    tool_context.state["temp:scratch"] = "never stored"
    return {"order_id": order_id, "status": "shipped", "bytes": [0, 255]}


def tool_turn(answer: str = "It shipped.", delay: float = 0.0) -> ScriptedLlm:
    """A model that calls ``lookup_order`` and then answers ``answer``."""
    call = types.Part(
        function_call=types.FunctionCall(
            id="call-1", name="lookup_order", args={"order_id": "A-17"}
        )
    )
    return ScriptedLlm(
        model="scripted",
        delay=delay,
        script=[
            LlmResponse(
                content=types.Content(role="model", parts=[call]), usage_metadata=usage(11, 3)
            ),
            LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=answer)]),
                usage_metadata=usage(20, 4),
            ),
        ],
    )


def runner(service: BaseSessionService, model: ScriptedLlm) -> Runner:
    agent = LlmAgent(
        name="clerk", model=model, instruction="Help with orders.", tools=[lookup_order]
    )
    return Runner(app_name=APP, agent=agent, session_service=service)


def said(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def run_turn(r: Runner, user_id: str, session_id: str, text: str) -> list[Any]:
    """The events one ``run_async`` turn yields."""
    return [
        event
        async for event in r.run_async(
            user_id=user_id, session_id=session_id, new_message=said(text)
        )
    ]
