"""The SDK's ChatConversationStore on agentstores' transcript."""

from __future__ import annotations

import logging
from typing import Any

from zav.agents_sdk.domain.chat_conversation_store import ChatConversationStore, LastTurnStatus
from zav.agents_sdk.domain.chat_message import ChatMessage, ConversationContext

from agentstores import ErasedError, NotFoundError

from .bundle import Bundle
from .conversation_fields import append_with_fields, conversation_fields
from .epochs import claim_of
from .errors import sdk_errors
from .keys import key_of
from .messages import from_stored, stable_id, to_message

log = logging.getLogger(__name__)


class AgentStoresConversationStore(ChatConversationStore):
    """The durable transcript, owner-only writes, one row per ChatMessage.

    Each message gets a stable id (:func:`~agentstores_zav.messages.stable_id`): a retried
    publication of a turn stores nothing twice. Inside a producing task the append
    carries the lease's epoch, so a fenced producer cannot add its answer. The
    conversation-level fields go into the conversation's metadata with the append.
    The bot turn (``create_if_absent=False``) on a conversation deleted or erased
    mid-stream stores nothing, as the SDK asks.
    """

    def __init__(self, bundle: Bundle) -> None:
        self._bundle = bundle

    async def append_messages(
        self,
        tenant: str,
        requester_uuid: str | None,
        session_id: str,
        agent_identifier: str,
        messages: list[ChatMessage],
        user_roles: str | None = None,
        user_tenants: str | None = None,
        user_agent_id: str | None = None,
        bot_params: dict[str, Any] | None = None,
        last_turn_status: LastTurnStatus | None = None,
        create_if_absent: bool = True,
        conversation_context: ConversationContext | None = None,
    ) -> None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        claim = claim_of(key)
        if claim is not None:
            anchor = claim.message_id
        else:
            info = await stores.conversations.get_conversation(key, principal)
            anchor = (info.tail_message_id if info is not None else None) or ""
        rows = [to_message(m, stable_id(m, anchor, i)) for i, m in enumerate(messages)]
        fields = conversation_fields(
            agent_identifier=agent_identifier,
            bot_params=bot_params,
            conversation_context=conversation_context,
            user_roles=user_roles,
            user_tenants=user_tenants,
            user_agent_id=user_agent_id,
        )
        async with sdk_errors(stores, key, principal):
            try:
                await append_with_fields(
                    stores.conversations,
                    key,
                    principal,
                    rows,
                    fields,
                    create_if_absent=create_if_absent,
                    last_turn_status=last_turn_status,
                )
            except (NotFoundError, ErasedError):
                if create_if_absent:
                    raise
                log.info("conversation %r is gone; the bot turn is not stored", key)

    async def set_last_turn_status(
        self,
        tenant: str,
        requester_uuid: str | None,
        session_id: str,
        last_turn_status: LastTurnStatus,
    ) -> None:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        async with sdk_errors(stores, key, principal):
            await stores.conversations.set_last_turn_status(key, principal, last_turn_status)

    async def get_transcript(
        self, tenant: str, requester_uuid: str | None, session_id: str
    ) -> list[ChatMessage]:
        stores = await self._bundle.stores()
        key, principal = key_of(tenant, requester_uuid, session_id)
        rows = await stores.conversations.read_messages(key, principal)
        return [from_stored(row) for row in rows]


__all__ = ["AgentStoresConversationStore"]
