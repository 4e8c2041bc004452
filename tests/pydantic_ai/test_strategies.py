"""The generated histories hold every part kind Pydantic AI's message unions name."""

from __future__ import annotations

import typing

import pydantic
from hypothesis import HealthCheck, given, settings
from pydantic_ai import messages

from .strategies import REQUEST_TAGS, RESPONSE_TAGS, histories

LEGACY = {"legacy-retry-tool-return", "legacy-retry-feedback"}
"""The tags a ``RetryPromptPart`` is sent to (nothing is sent to ``retry-prompt`` itself)."""


def union_tags(union: object) -> set[str]:
    members = typing.get_args(typing.get_args(union)[0])
    return {
        meta.tag
        for member in members
        for meta in typing.get_args(member)[1:]
        if isinstance(meta, pydantic.Tag)
    }


def test_the_strategies_name_every_tag_of_the_unions() -> None:
    assert union_tags(messages.ModelRequestPart) == REQUEST_TAGS | LEGACY
    assert union_tags(messages.ModelResponsePart) == RESPONSE_TAGS


def test_the_strategies_generate_every_tag() -> None:
    seen: set[tuple[str, str | None]] = set()

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(histories)
    def draw(history: list[messages.ModelMessage]) -> None:
        for message in history:
            if isinstance(message, messages.ModelRequest):
                for part in message.parts:
                    seen.add(("request", messages._model_request_part_discriminator(part)))
            else:
                for part in message.parts:
                    seen.add(("response", messages._model_response_part_discriminator(part)))

    draw()
    assert {t for k, t in seen if k == "request"} == REQUEST_TAGS - {"retry-prompt"} | LEGACY
    assert {t for k, t in seen if k == "response"} == RESPONSE_TAGS
