"""The SDK's ChatConversationStore on agentstores' transcript."""

from __future__ import annotations

import logging
from typing import Any

from zav.agents_sdk.domain.chat_conversation_store import ChatConversationStore, LastTurnStatus
from zav.agents_sdk.domain.chat_message import ChatMessage, ConversationContext

from agentstores import (
    ConversationKey,
    ErasedError,
    Message,
    NotFoundError,
    StoredMessage,
    UsageError,
)

from .bundle import Bundle
from .conversation_fields import append_with_fields, conversation_fields
from .epochs import claim_of
from .errors import sdk_errors
from .keys import key_of
from .messages import from_stored, own_id, role_of, stable_id, to_message

log = logging.getLogger(__name__)


class AgentStoresConversationStore(ChatConversationStore):
    """The durable transcript, owner-only writes, one row per ChatMessage.

    Each message gets a stable id (see :meth:`_ids`): a message published again stores
    nothing twice. Inside a producing task the append
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
        ids = await self._ids(key, principal, messages)
        rows = [to_message(m, row_id) for m, row_id in zip(messages, ids, strict=True)]
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
                stored = await append_with_fields(
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
                return
        if len(stored) < len(rows):
            await self._check_replayed(key, principal, messages, rows, stored)

    async def _check_replayed(
        self,
        key: ConversationKey,
        principal: str,
        messages: list[ChatMessage],
        rows: list[Message],
        stored: list[StoredMessage],
    ) -> None:
        """A message whose id was already there must be the one stored under it.

        A named message sent again (a resent request) is a no-op; a different message
        under a name already used would be dropped silently, so it is refused instead
        (``UsageError``, a ``ValueError``: the SDK answers 400). The rest of its batch
        stays stored (their ids were new).
        """
        new = {row.id for row in stored}
        replayed = {row.id: (message, row) for message, row in zip(messages, rows, strict=True)}
        replayed = {rid: pair for rid, pair in replayed.items() if rid not in new}
        stores = await self._bundle.stores()
        held = {m.id: m for m in await stores.conversations.read_messages(key, principal)}
        clashes = [
            message.message_id
            for rid, (message, row) in replayed.items()
            if rid in held and (held[rid].role, held[rid].content) != (row.role, row.content)
        ]
        if clashes:
            raise UsageError(
                f"message id {clashes[0]!r} already names another message of conversation "
                f"{key.session_id!r}; a message sent again must be the same message"
            )

    async def _ids(
        self, key: ConversationKey, principal: str, messages: list[ChatMessage]
    ) -> list[str]:
        """Each message's row id, the same for every publication of one message.

        A message with its own ``message_id`` (every bot message: the SDK stamps its
        turn's id; a user message the client named) is stored under it
        (:func:`~agentstores_zav.messages.own_id`). Any other is anchored on the claimed
        turn's id inside a producing task, else on the transcript's tail
        (:func:`~agentstores_zav.messages.stable_id`).
        """
        claim = claim_of(key)
        anchor: str | None = claim.message_id if claim is not None else None
        seen: dict[tuple[str, str], int] = {}
        ids: list[str] = []
        for position, message in enumerate(messages):
            role = role_of(message)
            if message.message_id:
                occurrence = seen.get((role, message.message_id), 0)
                seen[role, message.message_id] = occurrence + 1
                ids.append(own_id(role, message.message_id, occurrence))
                continue
            if anchor is None:
                stores = await self._bundle.stores()
                info = await stores.conversations.get_conversation(key, principal)
                anchor = (info.tail_message_id if info is not None else None) or ""
            ids.append(stable_id(message, anchor, position))
        return ids

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
