"""Real Pydantic AI agents on models that need no network: a FunctionModel whose
responses hold every response part kind and whose tool is retried once, and TestModel."""

from __future__ import annotations

from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import (
    BinaryContent,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def multimodal_prompt(text: str) -> list[object]:
    """A user prompt with text, an image URL and binary audio and document data."""
    return [
        text,
        ImageUrl("https://example.com/cat.png"),
        BinaryContent(b"RIFF\x00\x00WAVE", media_type="audio/wav"),
        BinaryContent(b"%PDF-1.4", media_type="application/pdf"),
    ]


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1].parts[-1]
    usage = RequestUsage(input_tokens=len(messages), output_tokens=3, details={"steps": 1})
    if isinstance(last, ToolReturnPart) and last.outcome == "success":
        return ModelResponse([TextPart(f"done: {last.content}")], usage=usage)
    n = sum(isinstance(m, ModelResponse) for m in messages)
    return ModelResponse(
        [
            ThinkingPart("let me see", signature="sig-1", provider_name="function"),
            TextPart("looking", provider_details={"b": 1, "a": 2}),
            NativeToolCallPart("web_search", {"q": "cats"}, "native-1", provider_name="function"),
            NativeToolReturnPart(
                "web_search", {"hits": [1, 2]}, "native-1", provider_name="function"
            ),
            FilePart(BinaryContent(PNG, media_type="image/png")),
            ToolCallPart("lookup", {"topic": "cats", "n": n}, f"call-{n}"),
        ],
        usage=usage,
        provider_details={"finish": "tool_calls"},
        provider_response_id=f"resp-{n}",
        finish_reason="tool_call",
    )


def rich_agent() -> Agent[None, str]:
    """Each run: a response with thinking, text, a native tool call and return, a file
    and a tool call; the tool asks for a retry the first time (a retry part), then
    answers (a tool return); then a text response."""
    agent: Agent[None, str] = Agent(FunctionModel(_respond), system_prompt="You help.")
    tries: dict[str, int] = {}

    @agent.tool
    def lookup(ctx: RunContext[None], topic: str, n: int) -> str:
        key = f"{ctx.run_id}"
        tries[key] = tries.get(key, 0) + 1
        if tries[key] == 1:
            raise ModelRetry("try again")
        return f"{topic} are great"

    return agent


def tool_agent() -> Agent[None, str]:
    """TestModel calling its one tool, then answering."""
    agent: Agent[None, str] = Agent(TestModel(), system_prompt="You help.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


__all__ = ["PNG", "multimodal_prompt", "rich_agent", "tool_agent"]
