"""Each stored row's role: what the conversation store's own reads (a chat UI's
transcript, ``recent``, the first user message) go by."""

from __future__ import annotations

from pydantic_ai.messages import (
    InstructionDeltaPart,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)

from agentstores_pydantic_ai.rows import role_of


def test_rows_carry_the_role_a_chat_ui_reads() -> None:
    system = SystemPromptPart("be brief")
    assert role_of(ModelResponse([TextPart("hi")])) == "assistant"
    assert role_of(ModelRequest([system, UserPromptPart("hi")])) == "user"
    assert role_of(ModelRequest([SpeechPart(speaker="user", transcript="hi")])) == "user"
    assert role_of(ModelRequest([ToolReturnPart("t", "ok", "c1")])) == "tool"
    assert role_of(ModelRequest([RetryFeedbackPart("again", retry=RetryInfo("no_output"))])) == (
        "tool"
    )
    assert role_of(ModelRequest([system])) == "system"
    assert role_of(ModelRequest([InstructionDeltaPart(id="i", content="x")])) == "other"
    assert role_of(ModelRequest([])) == "other"
