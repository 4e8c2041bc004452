"""What a restarted process replays into its working memory."""

from __future__ import annotations

from ..keys import ConversationKey
from ..models import StoredMessage
from ..stores import Stores


async def rehydrate(
    stores: Stores, key: ConversationKey, principal: str, n: int
) -> list[StoredMessage]:
    """The last ``n`` user/assistant messages, oldest first (``[]`` if none or invisible)."""
    return await stores.conversations.recent(key, principal, n)


__all__ = ["rehydrate"]
