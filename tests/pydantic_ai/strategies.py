"""Hypothesis strategies: Pydantic AI message histories holding every kind of part.

Every tag of the ``ModelRequestPart`` and ``ModelResponsePart`` unions, as
:data:`REQUEST_TAGS` and :data:`RESPONSE_TAGS` say (test_strategies checks them against
the unions and against what is generated; the deprecated ``RetryPromptPart`` reaches the
two legacy tags, which translate it).

Requests: system prompt; user prompt with text and multimodal content (image, audio,
video and document URLs, binary data, uploaded files, text content, cache points);
speech; tool return (every outcome, with retry info), tool search and capability load
returns; retry feedback and the deprecated retry prompt; tool availability, capability
load, model settings and instruction deltas; instruction baseline; compaction;
capability parts. Responses: text, thinking, tool call, tool search and capability load
calls, native (builtin) tool call and return and native tool search call and return,
file, compaction, speech. Messages carry usage, timestamps, provider details, model and
provider names, run and conversation ids and metadata.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CachePoint,
    CapabilityLoadDeltaPart,
    CompactionPart,
    DataCapabilityPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    InstructionBaselinePart,
    InstructionDeltaPart,
    InstructionPart,
    LoadCapabilityCallPart,
    LoadCapabilityReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    NativeToolSearchCallPart,
    NativeToolSearchReturnPart,
    OperatorSource,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SpeechPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    ToolSearchCallPart,
    ToolSearchReturnPart,
    UploadedFile,
    UserPromptPart,
    UserSource,
    VideoUrl,
)
from pydantic_ai.usage import RequestUsage


@dataclass(kw_only=True)
class ProgressPart(
    DataCapabilityPart[str], namespace="agentstores_tests", tag="progress", attributes=("task_id",)
):
    """A capability part kind of these tests' own (capability parts are always a kind)."""

    task_id: str


text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
names = st.text("abcdefghij_", min_size=1, max_size=8)
ids = st.uuids().map(str)
stamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
scalars = st.none() | st.booleans() | st.integers(-(2**31), 2**31) | text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
json_objects = st.dictionaries(text, json_values, max_size=3)
optional_objects = st.none() | json_objects

multimodal = st.one_of(
    st.builds(ImageUrl, url=st.just("https://example.com/a.png")),
    st.builds(AudioUrl, url=st.just("https://example.com/a.mp3")),
    st.builds(VideoUrl, url=st.just("https://example.com/a.mp4")),
    st.builds(DocumentUrl, url=st.just("https://example.com/a.pdf")),
    st.builds(
        BinaryContent,
        data=st.binary(max_size=16),
        media_type=st.sampled_from(["image/png", "audio/wav", "application/pdf", "text/plain"]),
    ),
    st.builds(TextContent, content=text, metadata=json_values),
    st.builds(UploadedFile, file_id=ids, provider_name=st.just("openai")),
    st.just(CachePoint()),
)
user_content = text | st.lists(text | multimodal, min_size=1, max_size=4)
audio = st.none() | st.builds(
    BinaryContent, data=st.binary(max_size=8), media_type=st.just("audio/pcm")
)
tool_matches = st.fixed_dictionaries({"name": names})
search_args = st.fixed_dictionaries({"queries": st.lists(text, max_size=2)})


def _retry_prompt(content: str, tool: str | None, call: str, at: datetime) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RetryPromptPart(content, tool_name=tool, tool_call_id=call, timestamp=at)


request_parts = st.one_of(
    st.builds(SystemPromptPart, content=text, timestamp=stamps),
    st.builds(UserPromptPart, content=user_content, timestamp=stamps),
    st.builds(
        ToolReturnPart,
        tool_name=names,
        content=json_values,
        tool_call_id=ids,
        metadata=json_values,
        timestamp=stamps,
        outcome=st.sampled_from(["success", "failed", "denied", "interrupted"]),
    ),
    st.builds(
        ToolReturnPart,
        tool_name=names,
        content=text,
        tool_call_id=ids,
        timestamp=stamps,
        outcome=st.just("retried"),
        retry=st.builds(
            RetryInfo,
            cause=st.sampled_from(["validation_error", "model_retry", "unknown_tool"]),
            attempt=st.integers(1, 5),
            max_retries=st.integers(1, 5),
        ),
    ),
    st.builds(
        RetryFeedbackPart,
        content=text,
        retry=st.builds(RetryInfo, cause=st.sampled_from(["model_retry", "no_output"])),
        timestamp=stamps,
    ),
    st.builds(_retry_prompt, text, st.none() | names, ids, stamps),
    st.builds(CompactionPart, content=text),
    st.builds(SpeechPart, speaker=st.just("user"), transcript=st.none() | text, audio=audio),
    st.builds(
        ToolSearchReturnPart,
        tool_call_id=ids,
        content=st.fixed_dictionaries({"discovered_tools": st.lists(tool_matches, max_size=2)}),
        timestamp=stamps,
    ),
    st.builds(
        LoadCapabilityReturnPart,
        tool_call_id=ids,
        content=st.fixed_dictionaries({}, optional={"message": text}),
        timestamp=stamps,
    ),
    st.builds(ToolAvailabilityDeltaPart, tools_added=st.lists(names, max_size=2), tool_call_id=ids),
    st.builds(CapabilityLoadDeltaPart, loaded=st.lists(names, max_size=2), tool_call_id=ids),
    st.builds(
        ModelSettingsDeltaPart,
        settings=st.fixed_dictionaries({"thinking": st.sampled_from([None, "low", "high"])}),
        top_level=st.booleans(),
    ),
    st.builds(InstructionDeltaPart, id=names, content=st.none() | text),
    st.builds(
        InstructionBaselinePart,
        instructions=st.lists(st.builds(InstructionPart, content=text, name=st.none() | names)),
    ),
    st.builds(
        ProgressPart,
        content=text,
        source=st.just(OperatorSource()) | st.just(UserSource()),
        task_id=names,
        timestamp=stamps,
        record_id=ids,
    ),
)
response_parts = st.one_of(
    st.builds(TextPart, content=text, id=st.none() | ids, provider_details=optional_objects),
    st.builds(
        ThinkingPart,
        content=text,
        id=st.none() | ids,
        signature=st.none() | text,
        provider_name=st.none() | names,
    ),
    st.builds(
        ToolCallPart, tool_name=names, args=st.none() | json_objects | text, tool_call_id=ids
    ),
    st.builds(
        NativeToolCallPart,
        tool_name=names,
        args=st.none() | json_objects,
        tool_call_id=ids,
        provider_name=names,
    ),
    st.builds(
        NativeToolReturnPart,
        tool_name=names,
        content=json_values,
        tool_call_id=ids,
        provider_name=names,
        provider_details=optional_objects,
        timestamp=stamps,
    ),
    st.builds(
        FilePart,
        content=st.builds(
            BinaryContent, data=st.binary(max_size=16), media_type=st.just("image/png")
        ),
    ),
    st.builds(CompactionPart, content=st.none() | text, provider_name=names),
    st.builds(
        SpeechPart,
        speaker=st.just("assistant"),
        transcript=st.none() | text,
        interrupted_at_ms=st.none() | st.integers(0, 10**6),
    ),
    st.builds(ToolSearchCallPart, args=st.none() | search_args, tool_call_id=ids),
    st.builds(LoadCapabilityCallPart, tool_call_id=ids),
    st.builds(
        NativeToolSearchCallPart,
        args=st.none() | search_args,
        tool_call_id=ids,
        provider_name=names,
    ),
    st.builds(
        NativeToolSearchReturnPart,
        tool_call_id=ids,
        content=st.fixed_dictionaries({"discovered_tools": st.lists(tool_matches, max_size=2)}),
        provider_name=names,
        timestamp=stamps,
    ),
)
usage = st.builds(
    RequestUsage,
    input_tokens=st.integers(0, 2**31),
    output_tokens=st.integers(0, 2**31),
    details=st.dictionaries(names, st.integers(0, 2**31), max_size=2),
)
requests = st.builds(
    ModelRequest,
    parts=st.lists(request_parts, min_size=1, max_size=4),
    timestamp=st.none() | stamps,
    instructions=st.none() | text,
    run_id=st.none() | ids,
    conversation_id=st.none() | ids,
    metadata=optional_objects,
)
responses = st.builds(
    ModelResponse,
    parts=st.lists(response_parts, min_size=1, max_size=4),
    usage=usage,
    model_name=st.none() | names,
    timestamp=stamps,
    provider_name=st.none() | names,
    provider_details=optional_objects,
    provider_response_id=st.none() | ids,
    finish_reason=st.none() | st.sampled_from(["stop", "length", "tool_call"]),
    run_id=st.none() | ids,
)
REQUEST_TAGS = frozenset(
    {
        "system-prompt",
        "user-prompt",
        "speech",
        "tool-search-return",
        "capability-load-return",
        "tool-return",
        "retry-prompt",
        "retry-feedback",
        "tool-availability-delta",
        "capability-load-delta",
        "model-settings-delta",
        "instruction-delta",
        "instruction-baseline",
        "compaction",
        "capability",
    }
)
"""The request part tags of the union the strategies cover (``retry-prompt``: the
deprecated part, which the discriminator sends to the two legacy tags)."""
RESPONSE_TAGS = frozenset(
    {
        "text",
        "tool-search-call",
        "capability-load-call",
        "tool-call",
        "builtin-tool-search-call",
        "builtin-tool-call",
        "builtin-tool-search-return",
        "builtin-tool-return",
        "thinking",
        "compaction",
        "file",
        "speech",
    }
)
histories: st.SearchStrategy[list[ModelMessage]] = st.lists(
    requests | responses, min_size=1, max_size=6
)
