"""Hypothesis strategies: Pydantic AI message histories holding every kind of part.

Requests: system prompt, user prompt (text, and multimodal content: image, audio,
video and document URLs, binary data, text content, cache points), tool return (every
outcome, with retry info), retry feedback, the deprecated retry prompt (which the adapter
itself translates on load), compaction. Responses: text, thinking, tool call, builtin
(native) tool call and return, file, compaction. Messages carry usage, timestamps,
provider details, model and provider names, run and conversation ids and metadata.
"""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CachePoint,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    VideoUrl,
)
from pydantic_ai.usage import RequestUsage

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
    st.just(CachePoint()),
)
user_content = text | st.lists(text | multimodal, min_size=1, max_size=4)


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
histories: st.SearchStrategy[list[ModelMessage]] = st.lists(
    requests | responses, min_size=1, max_size=6
)
