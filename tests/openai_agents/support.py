"""What the OpenAI Agents SDK bridge tests share: a session on a backend, an item of every
type the SDK stores, and agents driven by a scripted model (never a network call)."""

from __future__ import annotations

from typing import Any

from agents import Agent, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from openai.types.responses.response_reasoning_item import ResponseReasoningItem, Summary

from agentstores import Stores
from agentstores_openai_agents import AgentStoresSession
from tests.servers.backends import fresh_tenant

set_tracing_disabled(True)


def session(
    stores: Stores,
    session_id: str = "chat",
    *,
    tenant: str | None = None,
    principal: str = "alice",
    **kwargs: Any,
) -> AgentStoresSession:
    return AgentStoresSession(
        session_id, stores, tenant=tenant or fresh_tenant(), principal=principal, **kwargs
    )


ITEMS: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": 'Hello \u00e9\u4e2d\U0001f600 \x00 "quoted" \\ \'; DROP TABLE x;--',
    },
    {
        "role": "user",
        "type": "message",
        "content": [
            {"type": "input_text", "text": "look at this"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "auto",
            },
        ],
    },
    {"role": "system", "content": "be brief"},
    {"role": "developer", "content": "tools first"},
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "thinking"}],
        "encrypted_content": "gAAAA-opaque",
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Paris", "n": 1.5e-7}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21.5 \u00b0C"},
    {
        "id": "fc_2",
        "type": "function_call",
        "call_id": "call_2",
        "name": "transfer_to_billing",
        "arguments": "{}",
    },
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": '{"assistant": "Billing agent"}',
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Done.", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "not that"},
        ],
    },
    {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    },
    {
        "id": "fs_1",
        "type": "file_search_call",
        "status": "completed",
        "queries": ["q"],
        "results": None,
    },
    {
        "id": "cu_1",
        "type": "computer_call",
        "call_id": "cc_1",
        "action": {"type": "click", "button": "left", "x": 1, "y": 2},
        "pending_safety_checks": [],
        "status": "completed",
    },
    {
        "type": "computer_call_output",
        "call_id": "cc_1",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="},
    },
    {"id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "QUJD"},
    {
        "id": "ci_1",
        "type": "code_interpreter_call",
        "code": "print(1)",
        "container_id": "cntr",
        "outputs": [{"type": "logs", "logs": "1"}],
        "status": "completed",
    },
    {
        "id": "ls_1",
        "type": "local_shell_call",
        "call_id": "lsc_1",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    },
    {"id": "lso_1", "type": "local_shell_call_output", "output": "a\nb"},
    {"id": "mcp_1", "type": "mcp_list_tools", "server_label": "s", "tools": []},
    {
        "id": "mcpr_1",
        "type": "mcp_approval_request",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
    },
    {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
    {
        "id": "mcpc_1",
        "type": "mcp_call",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
        "output": None,
    },
    {"id": "ct_1", "type": "custom_tool_call", "call_id": "ctc_1", "name": "grammar", "input": "x"},
    {"type": "custom_tool_call_output", "call_id": "ctc_1", "output": "ok"},
    {"id": "cmp_1", "type": "compaction", "encrypted_content": "opaque-summary"},
    {"type": "item_reference", "id": "msg_0"},
    {"type": "a_type_this_sdk_does_not_know", "payload": {"nested": [1, 2.5, None, True, {}]}},
    {"role": "assistant", "content": ""},
    {"role": "user", "content": ""},
]
"""One item of every kind the SDK stores in a session (messages in each role and shape,
tool calls and outputs of every tool type, reasoning, handoff calls and outputs,
compaction, references) and one of a type it does not know: all read back equal."""


@function_tool
def weather(city: str) -> str:
    """The weather in ``city``."""
    return f"sunny in {city}"


def reasoning(text: str, item_id: str = "rs_1") -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id=item_id, type="reasoning", summary=[Summary(text=text, type="summary_text")]
    )


def two_agents() -> tuple[Agent[Any], ScriptedModel]:
    """A triage agent that reasons, calls a tool and hands off to a billing agent, which
    answers; one scripted model drives both (four model calls per turn)."""
    model = ScriptedModel()
    billing = Agent("billing", model=model, instructions="answer billing questions")
    triage = Agent("triage", model=model, tools=[weather], handoffs=[billing], instructions="route")
    return triage, model


def script_turn(model: ScriptedModel, n: int) -> None:
    """The model outputs of turn ``n`` of :func:`two_agents`."""
    model.extend(
        [
            [
                reasoning(f"turn {n}", f"rs_{n}"),
                function_call("weather", {"city": "Paris"}, call_id=f"w{n}"),
            ],
            [function_call("transfer_to_billing", {}, call_id=f"h{n}")],
            [assistant_message(f"answer {n}", item_id=f"msg_{n}")],
        ]
    )


__all__ = ["ITEMS", "reasoning", "script_turn", "session", "two_agents", "weather"]
