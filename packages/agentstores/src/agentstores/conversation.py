"""``stores.conversation(key, principal)``: one conversation, as one principal sees it.

The store API takes the key and principal on every call, which suits adapters and
power users; an application mostly works on one conversation at a time, so the handle
binds both and names the calls for what they mean. Every call goes through the same
stores (the same checks, errors and fencing).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from datetime import datetime

from .errors import UsageError
from .keys import ConversationKey, validate_principal
from .models import (
    JSON,
    ConversationInfo,
    ConversationTail,
    LastTurnStatus,
    Message,
    Speaker,
    StoredMessage,
    TranscriptMessage,
    new_message_id,
)
from .protocol.follow import FollowEvent, follow
from .protocol.lease import DEFAULT_LEASE_CONFIG, LeaseConfig
from .protocol.rehydrate import rehydrate
from .protocol.stop import stop_turn
from .protocol.turn import CHECKPOINT_EVERY, STREAM_EVERY, Turn
from .stores import UNSET, Cut, Stores, Unset


class Conversation:
    """A handle on one conversation for one principal; cheap to make, holds no resources."""

    def __init__(self, stores: Stores, key: ConversationKey, principal: str) -> None:
        if not isinstance(key, ConversationKey):
            raise UsageError(f"key must be a ConversationKey, got {type(key).__name__}")
        self.stores = stores
        self.key = key
        self.principal = validate_principal(principal)

    def __repr__(self) -> str:
        return f"Conversation({self.key!r}, principal={self.principal!r})"

    # --- writes ---------------------------------------------------------------------

    async def append(
        self,
        *messages: Message,
        expected_tail: str | Unset | None = UNSET,
        create_if_absent: bool = True,
        last_turn_status: LastTurnStatus | None = None,
        title: str | None = None,
        expires_at: datetime | None = None,
        metadata: Mapping[str, JSON] | None = None,
    ) -> list[StoredMessage]:
        """Append ``messages`` atomically; ids already present are skipped (a retry is a no-op).

        ``expected_tail`` makes the append conditional on the transcript's last message id
        (None: empty). ``metadata`` is merged into the conversation metadata in the same
        commit. Inside a turn the write carries the turn's epoch.

        Returns:
            The messages this call stored.

        Raises:
            StaleWriteError: the tail is not ``expected_tail``.
            NotOwnedError, ErasedError, FencedError, UsageError: as for ``append_messages``.
        """
        return await self.stores.conversations.append_messages(
            self.key,
            self.principal,
            list(messages),
            create_if_absent=create_if_absent,
            last_turn_status=last_turn_status,
            expected_tail=expected_tail,
            title=title,
            expires_at=expires_at,
            metadata=metadata,
        )

    async def set_title(self, title: str | None) -> None:
        """Set or clear (None) the title."""
        await self.stores.conversations.set_title(self.key, self.principal, title)

    async def set_metadata(self, updates: Mapping[str, JSON]) -> None:
        """Shallow-merge ``updates`` into the conversation metadata; a name mapped to None
        is removed. Inside a turn the write carries the turn's epoch."""
        await self.stores.conversations.set_metadata(self.key, self.principal, updates)

    async def share(self, principal: str) -> None:
        """Let ``principal`` read this conversation (only the owner may)."""
        await self.stores.conversations.share(self.key, self.principal, principal)

    async def unshare(self, principal: str) -> None:
        """Take ``principal``'s read access away."""
        await self.stores.conversations.unshare(self.key, self.principal, principal)

    async def truncate(
        self, message_id: str, *, cut: Cut = "by_role", expected_tail: str | None = None
    ) -> int:
        """Cut the transcript at ``message_id`` (everything after it goes; by default a
        user message goes too, see ``Cut``); returns how many messages were removed.

        ``expected_tail`` makes the cut conditional on the transcript's last message id
        (None: no condition): ``StaleWriteError`` and nothing removed when it moved.
        """
        return await self.stores.conversations.truncate(
            self.key, self.principal, message_id, cut=cut, expected_tail=expected_tail
        )

    async def branch(self, message_id: str, *, session_id: str | None = None) -> Conversation:
        """A new conversation, owned by this principal, holding the prefix up to
        ``message_id`` (fresh message ids); ``session_id`` names it, else a random one."""
        new_key = await self.stores.conversations.branch(
            self.key, self.principal, message_id, new_session_id=session_id
        )
        return Conversation(self.stores, new_key, self.principal)

    async def delete(self) -> bool:
        """Erase the conversation in every store and leave a tombstone (the right to be
        forgotten); True if there was something to erase."""
        return await self.stores.conversations.delete(self.key, self.principal)

    # --- reads ----------------------------------------------------------------------

    async def info(self) -> ConversationInfo | None:
        """The metadata (owner, title, stamps, tail, count, ``metadata``), or None if absent
        or not visible."""
        return await self.stores.conversations.get_conversation(self.key, self.principal)

    async def message(self, index: int, *, speaker: Speaker = "all") -> TranscriptMessage | None:
        """Message ``index`` of the ``speaker`` view (negative counts from the end), or None.

        ``await conv.message(0, speaker="user")`` is "the first thing I asked".
        """
        found = await self.stores.conversations.get_transcript(
            self.key, self.principal, index=index, speaker=speaker, limit=1
        )
        return found[0] if found else None

    async def transcript(
        self,
        *,
        time_range: tuple[datetime, datetime] | None = None,
        speaker: Speaker = "all",
        limit: int | None = None,
    ) -> list[TranscriptMessage]:
        """The transcript (or the part in ``time_range``, store clock), at most ``limit`` rows."""
        return await self.stores.conversations.get_transcript(
            self.key, self.principal, time_range=time_range, speaker=speaker, limit=limit
        )

    async def messages(self, *, start: int = 0, limit: int | None = None) -> list[StoredMessage]:
        """Every stored message from position ``start``, with roles, metadata and ``seq``."""
        return await self.stores.conversations.read_messages(
            self.key, self.principal, start=start, limit=limit
        )

    async def tail(self, n: int) -> ConversationTail | None:
        """The metadata and the last ``n`` rows of any role, as one snapshot (None if
        absent or not visible): where a framework continues its own history from."""
        return await self.stores.conversations.tail(self.key, self.principal, n)

    async def recent(self, n: int) -> list[StoredMessage]:
        """The last ``n`` user/assistant messages as stored, oldest first."""
        return await self.stores.conversations.recent(self.key, self.principal, n)

    async def rehydrate(self, n: int) -> list[StoredMessage]:
        """The last ``n`` turns that carry text, oldest first: what a restarted process
        replays into the model (blank and tool-call-only messages skipped)."""
        return await rehydrate(self.stores, self.key, self.principal, n)

    async def history(self) -> list[StoredMessage]:
        """The latest compaction message and everything after it (all if none)."""
        return await self.stores.conversations.history(self.key, self.principal)

    async def state(self) -> dict[str, JSON]:
        """The agent's saved working state (``{}`` if none): what a takeover resumes from."""
        return await self.stores.state.load(self.key, self.principal)

    # --- producing ------------------------------------------------------------------

    def turn(
        self,
        message_id: str | None = None,
        *,
        user: Message | None = None,
        expected_tail: str | Unset | None = UNSET,
        stream_every: float = STREAM_EVERY,
        checkpoint_every: float = CHECKPOINT_EVERY,
        lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG,
        title: str | None = None,
        expires_at: datetime | None = None,
    ) -> Turn:
        """A turn to run with ``async with``: see :class:`~agentstores.protocol.Turn`.

        ``message_id`` is the answer's id (fresh if None): the lease, the recording and the
        final assistant message all carry it. ``user`` is appended first, under the lease.
        ``expected_tail`` is the transcript tail the client last saw (None: empty); UNSET
        skips that check.
        """
        return Turn(
            self.stores,
            self.key,
            self.principal,
            new_message_id() if message_id is None else message_id,
            user=user,
            expected_tail=expected_tail,
            stream_every=stream_every,
            checkpoint_every=checkpoint_every,
            lease_config=lease_config,
            title=title,
            expires_at=expires_at,
        )

    async def stop(
        self, message_id: str | None = None, *, lease_config: LeaseConfig = DEFAULT_LEASE_CONFIG
    ) -> StoredMessage | None:
        """Stop the running turn (``message_id``, or whichever runs) from any replica: its
        producer is fenced and the partial answer kept with status ``cancelled``; returns
        the message kept (None when no turn was in flight). See
        :func:`~agentstores.protocol.stop_turn`."""
        return await stop_turn(
            self.stores, self.key, self.principal, message_id, lease_config=lease_config
        )

    def follow(
        self,
        start_index: int = 0,
        *,
        message_id: str | None = None,
        partial: bool = False,
        poll: float = 0.3,
        safety_poll: float = 2.0,
        dead_after: float = DEFAULT_LEASE_CONFIG.dead_after,
        grace: float | None = None,
    ) -> AsyncGenerator[FollowEvent, None]:
        """Stream the running turn to this principal (a reconnect, a second screen):
        updates it has not seen, then one verdict; see :func:`~agentstores.protocol.follow`."""
        return follow(
            self.stores,
            self.key,
            self.principal,
            start_index,
            message_id=message_id,
            partial=partial,
            poll=poll,
            safety_poll=safety_poll,
            dead_after=dead_after,
            grace=grace,
        )


__all__ = ["Conversation"]
