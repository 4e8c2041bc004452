"""The last rows of a conversation from its ``recent`` read, checked against its metadata.

A framework bridge that needs the last N rows and the tail they end at (the tail its next
append is conditioned on) reads the conversation's metadata and the store's ``recent``
turns together, in one round, and keeps the turns only when they are exactly the rows
from a position to that tail; otherwise it reads by position. Both checks live here so
every bridge makes them the same way.
"""

from __future__ import annotations

from .models import ConversationInfo, StoredMessage
from .stores.conversations import ConversationStore


def answers_recent(conversations: ConversationStore) -> bool:
    """Whether ``conversations`` answers ``recent`` in one read of its own.

    A store that does not composes it from metadata and position reads (slower than one
    read by position), and a wrapper around a store is not known to answer it.
    """
    own = getattr(type(conversations), "_recent", None)
    return own is not None and own is not ConversationStore._recent


def tail_window(
    turns: list[StoredMessage], info: ConversationInfo, start: int
) -> list[StoredMessage] | None:
    """The rows from position ``start`` to the tail ``info`` names, if ``turns`` (the
    store's last user/assistant turns, oldest first) hold every one of them.

    That is: the last ``message_count - start`` turns sit at positions
    ``start .. message_count - 1`` and the last is the tail. None if a row of another
    role is among them, or a writer came between the two reads.
    """
    count = info.message_count
    want = count - start
    if want <= 0:
        return []
    if len(turns) < want:
        return None
    window = turns[-want:]
    last = window[-1]
    if window[0].seq != start or last.seq != count - 1 or last.id != info.tail_message_id:
        return None
    return window


__all__ = ["answers_recent", "tail_window"]
