"""Starting a turn: claim the lease first, then check the transcript tail.

Checking the tail before claiming leaves a window in which another turn starts and
appends; claiming first closes it (agent servers that check first leave it open).
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from ..errors import StaleWriteError
from ..keys import ConversationKey
from ..models import Message
from ..stores import Stores
from .lease import DEFAULT_CONFIG, Lease, LeaseConfig, claim


async def start_turn(
    stores: Stores,
    key: ConversationKey,
    principal: str,
    message_id: str,
    expected_last_message_id: str | None,
    *,
    user_message: Message | None = None,
    config: LeaseConfig = DEFAULT_CONFIG,
    title: str | None = None,
    expires_at: datetime | None = None,
) -> Lease:
    """Claim the turn ``message_id``, then require the transcript tail to be
    ``expected_last_message_id`` (None: empty or absent conversation).

    With ``user_message`` the incoming message is appended under the new epoch,
    conditioned on the same tail, so the user's turn survives a producer crash. On a
    tail mismatch the lease is released and :class:`StaleWriteError` raised
    (:class:`BusyError` comes from the claim instead). The heartbeat is not started:
    use ``async with lease`` or ``lease.run``.

    Raises:
        BusyError: another live turn holds the conversation.
        StaleWriteError: the tail is not ``expected_last_message_id`` (``.tail`` and
            ``.expected`` set); the lease was released.
        ConflictError, ErasedError, NotOwnedError: as for :func:`claim`.
    """
    lease = await claim(stores, key, principal, message_id, config=config)
    try:
        info = await stores.conversations.get_conversation(key, principal)
        tail = info.tail_message_id if info is not None else None
        if tail != expected_last_message_id:
            raise StaleWriteError(
                f"transcript tail is {tail!r}, expected {expected_last_message_id!r}",
                key=key,
                tail=tail,
                expected=expected_last_message_id,
            )
        if user_message is not None:
            await lease.append(
                [user_message],
                create_if_absent=True,
                last_turn_status="running",
                expected_last_message_id=expected_last_message_id,
                title=title,
                expires_at=expires_at,
            )
    except BaseException:
        await asyncio.shield(lease.release())
        raise
    return lease


__all__ = ["start_turn"]
