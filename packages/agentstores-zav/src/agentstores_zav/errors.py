"""Refusals from agentstores as the errors the SDK's server maps to HTTP answers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from zav.agents_sdk.domain.chat_conversation_store import ConversationNotOwnedError

from agentstores import ConversationKey, NotOwnedError


@contextlib.contextmanager
def sdk_errors(key: ConversationKey, principal: str) -> Iterator[None]:
    """Turn ``NotOwnedError`` into ``ConversationNotOwnedError`` (the server's 403).

    The owner is named when the refusal carried it; a non-owner cannot read a conversation
    that is not shared with it, so otherwise it is named as "another user".
    """
    try:
        yield
    except NotOwnedError as exc:
        owner = exc.context.get("owner")
        raise ConversationNotOwnedError(
            session_id=key.session_id,
            owner=owner if isinstance(owner, str) else "another user",
            requester=principal,
        ) from exc
