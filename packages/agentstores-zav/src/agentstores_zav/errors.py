"""Refusals from agentstores as the errors the SDK's server maps to HTTP answers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from zav.agents_sdk.domain.chat_conversation_store import ConversationNotOwnedError

from agentstores import AgentStoresError, ConversationKey, NotOwnedError, Stores

ANOTHER_USER = "another user"
"""The owner's name in a refusal to a requester who may not see who owns the conversation."""


async def visible_owner(stores: Stores, key: ConversationKey, principal: str) -> str:
    """The owner of ``key`` as ``principal`` may already see it, else :data:`ANOTHER_USER`.

    The SDK's 403 body is ``str(ConversationNotOwnedError)``, which names the owner. A
    requester the conversation is shared with reads the owner in the conversation's
    info anyway, so it is named to them; to anyone else agentstores shows nothing of
    the conversation, and the refusal names nobody (no owner identity leaks). The
    lookup is the requester's own read, never a privileged one.
    """
    with contextlib.suppress(AgentStoresError):
        info = await stores.conversations.get_conversation(key, principal)
        if info is not None and info.owner != principal:
            return info.owner
    return ANOTHER_USER


@contextlib.asynccontextmanager
async def sdk_errors(stores: Stores, key: ConversationKey, principal: str) -> AsyncIterator[None]:
    """Turn ``NotOwnedError`` into ``ConversationNotOwnedError`` (the server's 403),
    naming the owner as :func:`visible_owner` decides."""
    try:
        yield
    except NotOwnedError as exc:
        owner = await visible_owner(stores, key, principal)
        raise ConversationNotOwnedError(
            session_id=key.session_id, owner=owner, requester=principal
        ) from exc


__all__ = ["ANOTHER_USER", "sdk_errors", "visible_owner"]
