"""What a restarted process replays into its working memory.

``recent`` is a plain read: the last N user and assistant messages as stored.
``rehydrate`` is what a model needs to carry on: the last N *turns*, that is user and
assistant messages that carry text. A whitespace-only message, or an assistant message
holding only tool calls, is not a turn and is skipped, so it cannot crowd real turns out.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..keys import ConversationKey
from ..models import JSON, MAX_COUNTER, StoredMessage, check_counter
from ..stores import Stores

_TEXT_KEYS = ("text", "content")


def message_text(content: JSON) -> str:
    """The text ``content`` carries: a string; a mapping's ``text`` or ``content``; or the
    text parts of a list (strings and ``{"type": "text", "text": ...}`` parts). Tool calls,
    images and other parts carry none."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        kind = content.get("type")
        if kind is not None and kind != "text":
            return ""
        for name in _TEXT_KEYS:
            text = message_text(content.get(name))
            if text.strip():
                return text
        return ""
    if isinstance(content, list):
        return "".join(message_text(part) for part in content)
    return ""


def is_turn(message: StoredMessage) -> bool:
    """A user or assistant message with text that is not only whitespace."""
    return message.role in ("user", "assistant") and bool(message_text(message.content).strip())


async def rehydrate(
    stores: Stores, key: ConversationKey, principal: str, n: int
) -> list[StoredMessage]:
    """The last ``n`` turns (user/assistant messages carrying text), oldest first.

    ``[]`` if there are none or the conversation is not visible. Reads backwards in
    growing windows, so skipped messages cost extra reads only when they are there.

    Raises:
        UsageError: ``n`` is not an int from 0 to 2**63 - 1.
    """
    n = check_counter(n, "n")
    if n == 0:
        return []
    window = n
    while True:
        messages = await stores.conversations.recent(key, principal, window)
        turns = [m for m in messages if is_turn(m)]
        if len(turns) >= n or len(messages) < window or window >= MAX_COUNTER:
            return turns[-n:]
        window = min(MAX_COUNTER, window * 4)


__all__ = ["is_turn", "message_text", "rehydrate"]
