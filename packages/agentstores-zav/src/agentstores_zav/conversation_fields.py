"""Where the SDK's conversation-level fields live: the conversation's metadata.

``agent_identifier``, ``bot_params``, ``conversation_context``, ``user_roles``,
``user_tenants`` and ``user_agent_id`` arrive with every append; they are merged into
the conversation's metadata atomically with it (core's ``append_messages(...,
metadata=...)``, a shallow merge). This module is the one place that knows how.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zav.agents_sdk.domain.chat_message import ConversationContext

from agentstores import ConversationKey, Message, StoredMessage
from agentstores.models import LastTurnStatus
from agentstores.stores import ConversationStore

PREFIX = "zav."
"""Metadata keys this bridge writes start with it, beside anyone else's."""


def conversation_fields(
    *,
    agent_identifier: str,
    bot_params: Mapping[str, Any] | None,
    conversation_context: ConversationContext | None,
    user_roles: str | None,
    user_tenants: str | None,
    user_agent_id: str | None,
) -> dict[str, Any]:
    """The fields given on this append (a field the SDK passed as None is left as it is)."""
    fields: dict[str, Any] = {"agent_identifier": agent_identifier}
    if bot_params is not None:
        fields["bot_params"] = dict(bot_params)
    if conversation_context is not None:
        fields["conversation_context"] = conversation_context.model_dump(
            mode="json", exclude_unset=True
        )
    if user_roles is not None:
        fields["user_roles"] = user_roles
    if user_tenants is not None:
        fields["user_tenants"] = user_tenants
    if user_agent_id is not None:
        fields["user_agent_id"] = user_agent_id
    return {PREFIX + name: value for name, value in fields.items()}


async def append_with_fields(
    store: ConversationStore,
    key: ConversationKey,
    principal: str,
    rows: Sequence[Message],
    fields: Mapping[str, Any],
    *,
    create_if_absent: bool,
    last_turn_status: LastTurnStatus | None,
) -> list[StoredMessage]:
    """Append ``rows`` and merge ``fields`` into the conversation's metadata, atomically;
    the rows this call stored (those whose id was not there yet)."""
    return await store.append_messages(
        key,
        principal,
        list(rows),
        create_if_absent=create_if_absent,
        last_turn_status=last_turn_status,
        metadata=dict(fields),
    )


def fields_of(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The SDK's conversation-level fields back out of a conversation's metadata."""
    return {k[len(PREFIX) :]: v for k, v in metadata.items() if k.startswith(PREFIX)}


__all__ = ["PREFIX", "append_with_fields", "conversation_fields", "fields_of"]
