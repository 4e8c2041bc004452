"""ConversationStore: the durable transcript, its metadata, sharing, retention and erasure."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, get_args

from ..errors import UsageError
from ..keys import ConversationKey, validate_id, validate_principal
from ..models import (
    JSON,
    LAST_TURN_STATUSES,
    MAX_COUNTER,
    SPEAKERS,
    ConversationInfo,
    ConversationTail,
    LastTurnStatus,
    Message,
    Page,
    Speaker,
    StoredMessage,
    TranscriptMessage,
    check_counter,
)
from . import composed_reads
from ._base import (
    UNSET,
    StoreBase,
    Unset,
    check_datetime,
    check_epoch,
    check_key,
    check_limit,
    check_text,
    encode_json,
)
from .ambient import write_epoch
from .conversation_metadata import MetadataUpdate, check_metadata_update
from .kit import decode_cursor

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""Largest encoded ``content`` + ``metadata`` of one message."""
MAX_BATCH = 1000
"""Most messages one ``append_messages`` call may carry."""
MAX_APPEND_BYTES = 64 * 1024 * 1024
"""Largest encoded ``content`` + ``metadata`` of all the messages of one
``append_messages`` together: eight messages of the largest size, and as much as one
state save carries (``MAX_STATE_BYTES``), so no append is a bigger request than the
biggest one any store already takes (a LangGraph checkpoint, its changed channels one
message each in one append, holds as much as a state blob). Not more: an append is one
request, a Lua call that holds a Redis server while it runs and an S3 key header that
every later read downloads until the next append."""
MAX_IDLE = timedelta(days=36_525)
"""Longest ``IdleFor.duration`` (a hundred years): longer than anything stored can have
been idle, and short enough that ``now - duration`` is a time every backend can hold."""
MAX_TITLE_CHARS = 1024
MAX_PAGE = 1000

Cut = Literal["by_role", "before", "after"]
"""Where ``truncate`` cuts: ``by_role`` before a user message (it goes: the edit of a
question) and after any other (it stays); ``before`` (the message goes) or ``after`` (it
stays) whatever its role, for a framework that removes exact items."""
CUTS: frozenset[str] = frozenset(get_args(Cut))


@dataclass(frozen=True, slots=True)
class TranscriptQuery:
    """A validated ``get_transcript`` request, as adapters receive it.

    Exactly one of: ``index`` set (one row, counted in the speaker-filtered view,
    negative from the end), ``time_range`` set (inclusive both ends), or neither (all).
    ``limit`` keeps the first ``limit`` rows of the result.
    """

    speaker: Speaker
    index: int | None = None
    time_range: tuple[datetime, datetime] | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class Expired:
    """Sweep rule: temporary conversations whose ``expires_at`` has passed (store clock)."""


@dataclass(frozen=True, slots=True)
class IdleFor:
    """Sweep rule: conversations not updated for ``duration`` (store clock)."""

    duration: timedelta


@dataclass(frozen=True, slots=True)
class OverCap:
    """Sweep rule: a principal's conversations beyond the ``keep`` most recently updated
    (ordered by ``updated_at`` then ``session_id``, both descending, per tenant)."""

    keep: int


SweepRule = Expired | IdleFor | OverCap


def check_rule(rule: object) -> SweepRule:
    """``rule`` if it is a valid sweep rule; ``UsageError`` otherwise: ``IdleFor.duration``
    must be a timedelta above zero and at most :data:`MAX_IDLE`, ``OverCap.keep`` an int
    from 0 to 2**63 - 1 (what every backend compares exactly)."""
    if isinstance(rule, Expired):
        return rule
    if isinstance(rule, IdleFor):
        duration = rule.duration
        if not isinstance(duration, timedelta) or not timedelta(0) < duration <= MAX_IDLE:
            raise UsageError(
                f"IdleFor.duration must be a timedelta above zero and at most {MAX_IDLE.days} "
                f"days, got {duration!r}"
            )
        return rule
    if isinstance(rule, OverCap):
        check_counter(rule.keep, "OverCap.keep")
        return rule
    raise UsageError(f"unknown sweep rule {rule!r}")


@dataclass(frozen=True, slots=True)
class EncodedMessage:
    """A message with its content and metadata already encoded as canonical JSON bytes."""

    message: Message
    content_json: bytes
    metadata_json: bytes


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """A validated ``append_messages`` call, as adapters receive it.

    ``expected_tail`` is the tail condition: a message id, ``None`` for "the transcript
    is empty", or ``UNSET`` for no condition (see :attr:`has_tail_condition`).
    """

    messages: tuple[EncodedMessage, ...]
    create_if_absent: bool = True
    last_turn_status: LastTurnStatus | None = None
    expected_tail: str | Unset | None = UNSET
    epoch: int | None = None
    title: str | None = None
    expires_at: datetime | None = None
    metadata: MetadataUpdate | None = None
    """Conversation metadata to shallow-merge in (see ``set_metadata``), or None."""

    @property
    def has_tail_condition(self) -> bool:
        """Whether the caller asked for the tail to be checked."""
        return self.expected_tail is not UNSET


class ConversationStore(StoreBase, ABC):
    """The durable transcript: rules every backend keeps (the contract suite checks each):

    Ownership and visibility live in the key's header shared by all stores of one
    backend: the first principal to write anything under a key owns it; writes by
    another principal raise ``NotOwnedError``; reads by a principal that neither owns
    the key nor has it shared see exactly what an absent key gives. Writes with an
    ``epoch`` below the key's fence raise ``FencedError`` and change nothing, and raise
    the fence otherwise. Writes to an erased key raise ``ErasedError``.

    ``append_messages`` (atomic, whole batch or nothing):
      1. erased key -> ``ErasedError``; absent key and not ``create_if_absent`` ->
         ``NotFoundError``; owner / fence checks;
      2. if every message id is already present: no-op, return ``[]`` (idempotent
         publication, checked before the tail condition);
      3. ``expected_tail`` given (None = empty) and tail differs ->
         ``StaleWriteError``;
      4. append the messages not yet present, in order; ``seq`` continues from the
         current length; ``created_at`` is the store clock, never below the previous
         message's; update tail, count, ``updated_at``, ``last_turn_status`` (when
         given), title, ``expires_at`` and metadata (when given; merged as by
         ``set_metadata``); return the stored messages.
    ``truncate`` (atomic):
      1. erased key -> ``ErasedError``; absent key -> ``NotFoundError``; owner / fence
         checks;
      2. ``expected_tail`` given and tail differs -> ``StaleWriteError`` (nothing
         removed);
      3. unknown ``message_id`` -> ``NotFoundError``;
      4. remove the rows from :func:`cut_position` on (``by_role``: a user message
         goes with all after it, any other stays and all after it goes).
    ``branch`` copies the prefix
    up to and including ``message_id`` into a new conversation owned by the caller,
    with fresh message ids (the caller needs read access only), the source's title and
    metadata. ``set_metadata`` shallow-merges into the conversation metadata (a name
    mapped to None is removed); truncate keeps the metadata.
    ``delete`` erases every store's data for the key and leaves a tombstone.
    """

    # --- writes ---------------------------------------------------------------------

    async def append_messages(
        self,
        key: ConversationKey,
        principal: str,
        messages: Sequence[Message],
        *,
        create_if_absent: bool = True,
        last_turn_status: LastTurnStatus | None = None,
        expected_tail: str | Unset | None = UNSET,
        epoch: int | None = None,
        title: str | None = None,
        expires_at: datetime | None = None,
        metadata: Mapping[str, JSON] | None = None,
    ) -> list[StoredMessage]:
        """Append ``messages`` atomically (all or none); see the class docstring's steps.

        ``metadata`` is shallow-merged into the conversation metadata in the same commit
        as the messages (the initial metadata when this call creates the conversation),
        as :meth:`set_metadata` does; an idempotent re-append applies none of it.

        Returns the messages stored by this call (``[]`` when every id was present).

        Raises:
            UsageError: a bad argument (batch too big, in count or in total bytes,
                duplicate id, oversized message, metadata that is not JSON or would be over
                the limit).
            ErasedError: the conversation was erased.
            NotFoundError: it does not exist and ``create_if_absent`` is False.
            NotOwnedError: another principal owns it.
            FencedError: ``epoch`` is below the key's fence.
            StaleWriteError: the tail is not ``expected_tail``.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise UsageError("messages must be a sequence of Message")
        if len(messages) > MAX_BATCH:
            raise UsageError(f"at most {MAX_BATCH} messages per append, got {len(messages)}")
        seen: set[str] = set()
        encoded: list[EncodedMessage] = []
        total = 0
        for m in messages:
            if not isinstance(m, Message):
                raise UsageError(f"expected Message, got {type(m).__name__}")
            if m.id in seen:
                raise UsageError(f"message id {m.id!r} appears twice in one batch")
            seen.add(m.id)
            content = encode_json(m.content, "message content", MAX_MESSAGE_BYTES)
            message_meta = encode_json(dict(m.metadata), "message metadata", MAX_MESSAGE_BYTES)
            size = len(content) + len(message_meta)
            if size > MAX_MESSAGE_BYTES:
                raise UsageError(f"message {m.id!r} is over {MAX_MESSAGE_BYTES} bytes")
            total += size
            if total > MAX_APPEND_BYTES:
                raise UsageError(
                    f"the messages of one append are over {MAX_APPEND_BYTES} bytes together; "
                    "append them in several calls"
                )
            encoded.append(EncodedMessage(m, content, message_meta))
        if last_turn_status is not None:
            _check_status(last_turn_status)
        if expected_tail is not UNSET and expected_tail is not None:
            validate_id(expected_tail, "expected_tail")
        epoch = write_epoch(key, check_epoch(epoch))
        _check_title(title)
        check_datetime(expires_at, "expires_at", optional=True)
        meta = None if metadata is None else check_metadata_update(metadata)
        async with self.translating_errors("conversations.append_messages", key):
            stored = await self._append_messages(
                key,
                principal,
                AppendRequest(
                    messages=tuple(encoded),
                    create_if_absent=bool(create_if_absent),
                    last_turn_status=last_turn_status,
                    expected_tail=expected_tail,
                    epoch=epoch,
                    title=title,
                    expires_at=expires_at,
                    metadata=meta,
                ),
            )
        if stored:
            self.woke(key)
        return stored

    async def set_last_turn_status(
        self,
        key: ConversationKey,
        principal: str,
        status: LastTurnStatus,
        *,
        epoch: int | None = None,
    ) -> None:
        """Record how the last turn ended; a no-op on a missing key (nothing created).

        Raises:
            UsageError: a malformed key, principal, status or epoch.
            FencedError: ``epoch`` is below the key's fence.
            NotOwnedError: another principal owns the conversation.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        _check_status(status)
        epoch = write_epoch(key, check_epoch(epoch))
        async with self.translating_errors("conversations.set_last_turn_status", key):
            await self._set_last_turn_status(key, principal, status, epoch)

    async def set_title(
        self, key: ConversationKey, principal: str, title: str | None, *, epoch: int | None = None
    ) -> None:
        """Set (or clear, with None) the conversation's title.

        Raises:
            UsageError: a malformed key, principal, title or epoch.
            NotFoundError: no such conversation.
            FencedError: ``epoch`` is below the key's fence.
            NotOwnedError: another principal owns the conversation.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        _check_title(title)
        epoch = write_epoch(key, check_epoch(epoch))
        async with self.translating_errors("conversations.set_title", key):
            await self._set_title(key, principal, title, epoch)

    async def set_metadata(
        self,
        key: ConversationKey,
        principal: str,
        updates: Mapping[str, JSON],
        *,
        epoch: int | None = None,
    ) -> None:
        """Shallow-merge ``updates`` into the conversation metadata (owner only, fenced).

        Each name in ``updates`` replaces that name's value; a name mapped to ``None`` is
        removed (so ``null`` is never stored); names not in ``updates`` are kept. Like
        :meth:`set_title` it moves ``updated_at``. The metadata is at most
        ``MAX_CONVERSATION_METADATA_BYTES`` (each name's UTF-8 length plus its value's
        canonical JSON length, summed).

        Raises:
            UsageError: a malformed key, principal or epoch; ``updates`` not a mapping of
                non-empty str names to JSON values; the metadata would be over the limit.
            NotFoundError: no such conversation.
            FencedError: ``epoch`` is below the key's fence.
            NotOwnedError: another principal owns the conversation.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        encoded = check_metadata_update(updates, "updates")
        epoch = write_epoch(key, check_epoch(epoch))
        async with self.translating_errors("conversations.set_metadata", key):
            await self._set_metadata(key, principal, encoded, epoch)

    async def share(self, key: ConversationKey, principal: str, with_principal: str) -> None:
        """Give ``with_principal`` read access (owner only).

        Raises:
            UsageError: a malformed key or principal.
            NotFoundError: no such conversation.
            NotOwnedError: the caller does not own the conversation.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        with_principal = validate_principal(with_principal)
        async with self.translating_errors("conversations.share", key):
            await self._set_shared(key, principal, with_principal, True)

    async def unshare(self, key: ConversationKey, principal: str, with_principal: str) -> None:
        """Take ``with_principal``'s read access away (owner only).

        Raises:
            UsageError: a malformed key or principal.
            NotFoundError: no such conversation.
            NotOwnedError: the caller does not own the conversation.
            ErasedError: the conversation was erased.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        with_principal = validate_principal(with_principal)
        async with self.translating_errors("conversations.unshare", key):
            await self._set_shared(key, principal, with_principal, False)

    async def truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        *,
        epoch: int | None = None,
        cut: Cut = "by_role",
        expected_tail: str | None = None,
    ) -> int:
        """Cut the transcript at ``message_id``: everything after it goes, and so does the
        message itself if ``cut`` says (``by_role``: a user message goes, any other stays;
        ``before``: it goes; ``after``: it stays).

        ``expected_tail`` (a message id; None: no condition) makes the cut conditional on
        the transcript's last message id, checked atomically with the removal, as an
        append's is: ``tail(1)`` then ``truncate(last, cut="before", expected_tail=last)``
        removes the last message and nothing another writer appended meanwhile.

        Returns:
            How many messages were removed.

        Raises:
            UsageError: a malformed key, principal, message id, expected tail or epoch.
            NotFoundError: no such conversation, or no such message in it.
            FencedError: ``epoch`` is below the key's fence.
            NotOwnedError: another principal owns the conversation.
            ErasedError: the conversation was erased.
            StaleWriteError: the tail is not ``expected_tail`` (nothing was removed).
        """
        key = check_key(key)
        principal = validate_principal(principal)
        validate_id(message_id, "message_id")
        if cut not in CUTS:
            raise UsageError(f"unknown cut {cut!r}; expected one of {sorted(CUTS)}")
        if expected_tail is not None:
            validate_id(expected_tail, "expected_tail")
        epoch = write_epoch(key, check_epoch(epoch))
        async with self.translating_errors("conversations.truncate", key):
            return await self._truncate(key, principal, message_id, epoch, cut, expected_tail)

    async def branch(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        *,
        new_session_id: str | None = None,
    ) -> ConversationKey:
        """Copy the prefix up to and including ``message_id`` into a new conversation
        owned by the caller, with fresh message ids (read access suffices).

        Returns:
            The new conversation's key (``new_session_id`` or a random one, same tenant).

        Raises:
            UsageError: a malformed argument, or ``new_session_id`` equal to the source's.
            NotFoundError: the source or the message is absent or not visible to the caller.
            ConflictError: the new key is already in use (or erased).
        """
        key = check_key(key)
        principal = validate_principal(principal)
        validate_id(message_id, "message_id")
        if new_session_id is None:
            import uuid

            new_session_id = uuid.uuid4().hex
        new_key = ConversationKey(key.tenant, new_session_id)
        if new_key == key:
            raise UsageError("a branch needs a session id of its own")
        async with self.translating_errors("conversations.branch", key):
            await self._branch(key, principal, message_id, new_key)
        return new_key

    async def delete(self, key: ConversationKey, principal: str) -> bool:
        """Erase the conversation in every store and leave a tombstone.

        Returns:
            True if something was erased; False if there was nothing to erase.

        Raises:
            UsageError: a malformed key or principal.
            NotOwnedError: another principal owns the conversation.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        async with self.translating_errors("conversations.delete", key):
            erased = await self._erase(key, principal, None)
        if erased:
            self.woke(key)
        return erased

    # --- reads ----------------------------------------------------------------------

    async def get_transcript(
        self,
        key: ConversationKey,
        principal: str,
        *,
        index: int | None = None,
        time_range: tuple[datetime, datetime] | None = None,
        speaker: Speaker = "all",
        limit: int | None = None,
    ) -> list[TranscriptMessage]:
        """Transcript rows: one by ``index`` (counted in the ``speaker`` view, negative
        from the end), those in ``time_range`` (inclusive, store clock), or all; at most
        ``limit``. Empty for an absent or invisible conversation.

        Raises:
            UsageError: a malformed argument, or both ``index`` and ``time_range``.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        if speaker not in SPEAKERS:
            raise UsageError(f"unknown speaker {speaker!r}; expected one of {sorted(SPEAKERS)}")
        if index is not None and time_range is not None:
            raise UsageError("pass index or time_range, not both")
        if index is not None and (
            not isinstance(index, int) or isinstance(index, bool) or abs(index) > MAX_COUNTER
        ):
            raise UsageError(f"index must be an int from -(2**63 - 1) to 2**63 - 1, got {index!r}")
        if time_range is not None:
            if not isinstance(time_range, tuple) or len(time_range) != 2:
                raise UsageError("time_range must be a (start, end) tuple")
            check_datetime(time_range[0], "time_range start")
            check_datetime(time_range[1], "time_range end")
        limit = check_limit(limit)
        query = TranscriptQuery(speaker=speaker, index=index, time_range=time_range, limit=limit)
        if limit == 0:
            return []
        async with self.translating_errors("conversations.get_transcript", key):
            return await self._get_transcript(key, principal, query)

    async def recent(self, key: ConversationKey, principal: str, limit: int) -> list[StoredMessage]:
        """The last ``limit`` user/assistant messages, oldest first.

        Raises:
            UsageError: a malformed key, principal or limit.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        checked = check_limit(limit, optional=False)
        if checked == 0:
            return []
        async with self.translating_errors("conversations.recent", key):
            return await self._recent(key, principal, checked)

    async def tail(
        self, key: ConversationKey, principal: str, limit: int
    ) -> ConversationTail | None:
        """The conversation's metadata and its last ``limit`` rows of any role, oldest
        first, as one snapshot (the rows end at the tail the metadata names); None when
        absent or not visible. One request on a store that can answer it in one.

        Raises:
            UsageError: a malformed key, principal or limit.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        checked = check_limit(limit, optional=False)
        async with self.translating_errors("conversations.tail", key):
            return await self._tail(key, principal, checked)

    async def history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        """The latest compaction message and everything after it (all if none).

        Raises:
            UsageError: a malformed key or principal.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        async with self.translating_errors("conversations.history", key):
            return await self._history(key, principal)

    async def read_messages(
        self, key: ConversationKey, principal: str, *, start: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Stored messages with ``seq >= start``, in order, at most ``limit``.

        Raises:
            UsageError: a malformed key, principal, start or limit.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        check_limit(start, "start", optional=False)
        limit = check_limit(limit)
        if limit == 0:
            return []
        async with self.translating_errors("conversations.read_messages", key):
            return await self._read_messages(key, principal, start, limit)

    async def get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None:
        """The conversation's metadata, or None when absent or not visible.

        Raises:
            UsageError: a malformed key or principal.
        """
        key = check_key(key)
        principal = validate_principal(principal)
        async with self.translating_errors("conversations.get_conversation", key):
            return await self._get_conversation(key, principal)

    async def list_conversations(
        self, tenant: str, principal: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        """The principal's own conversations in ``tenant``, newest ``updated_at`` first,
        in keyset pages: pass ``next_cursor`` back for the next one.

        Raises:
            UsageError: a malformed tenant or principal, a limit outside 1..1000, or a
                cursor this store did not produce.
        """
        validate_id(tenant, "tenant")
        principal = validate_principal(principal)
        checked = check_limit(limit, optional=False)
        if checked == 0 or checked > MAX_PAGE:
            raise UsageError(f"limit must be between 1 and {MAX_PAGE}")
        if cursor is not None:
            decode_cursor(cursor)
        async with self.translating_errors("conversations.list_conversations"):
            return await self._list_conversations(tenant, principal, checked, cursor)

    # --- retention (used by the sweeper; no principal: an administrative path) -------

    async def find_sweepable(self, rule: SweepRule, *, limit: int = 100) -> list[ConversationKey]:
        """Up to ``limit`` keys that match ``rule`` now (store clock), for the sweeper.

        Raises:
            UsageError: an unknown rule or a malformed limit.
        """
        rule = check_rule(rule)
        checked = check_limit(limit, optional=False)
        async with self.translating_errors("conversations.find_sweepable"):
            return await self._find_sweepable(rule, checked)

    async def erase_if(self, key: ConversationKey, rule: SweepRule) -> bool:
        """Erase ``key`` iff it still matches ``rule``, checked atomically with the erase.

        Returns:
            True if this call erased it.

        Raises:
            UsageError: a malformed key or an unknown rule.
        """
        key = check_key(key)
        rule = check_rule(rule)
        async with self.translating_errors("conversations.erase_if", key):
            erased = await self._erase(key, None, rule)
        if erased:
            self.woke(key)
        return erased

    # --- what adapters implement ---------------------------------------------------

    @abstractmethod
    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        """Keep the class docstring's steps 1-4 atomically."""

    @abstractmethod
    async def _set_last_turn_status(
        self, key: ConversationKey, principal: str, status: LastTurnStatus, epoch: int | None
    ) -> None: ...

    @abstractmethod
    async def _set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None: ...

    @abstractmethod
    async def _set_metadata(
        self, key: ConversationKey, principal: str, updates: MetadataUpdate, epoch: int | None
    ) -> None:
        """As ``_set_title``, merging ``updates`` (``merge_metadata``) instead."""

    @abstractmethod
    async def _set_shared(
        self, key: ConversationKey, principal: str, with_principal: str, shared: bool
    ) -> None: ...

    @abstractmethod
    async def _truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        cut: Cut,
        expected_tail: str | None,
    ) -> int:
        """Keep the class docstring's truncate steps atomically: the rows from the cut on
        (see :func:`cut_position`) go, unless the tail is not ``expected_tail`` (when not
        None: ``Refusal.STALE_TAIL`` with ``tail`` and ``expected``); how many went."""

    @abstractmethod
    async def _branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> None:
        """``ConflictError`` if ``new_key`` already exists (or is erased)."""

    @abstractmethod
    async def _erase(
        self, key: ConversationKey, principal: str | None, rule: SweepRule | None
    ) -> bool:
        """Erase every store's data for ``key`` and leave a tombstone.

        ``principal`` set: an owner's delete (``NotOwnedError`` for others; False when
        absent). ``rule`` set: the sweeper's delete, only if ``rule`` still holds.
        """

    # Composed from _read_messages and _get_conversation (see composed_reads); an
    # adapter overrides these only to be faster.

    async def _get_transcript(
        self, key: ConversationKey, principal: str, query: TranscriptQuery
    ) -> list[TranscriptMessage]:
        return await composed_reads.get_transcript(self, key, principal, query)

    async def _recent(
        self, key: ConversationKey, principal: str, limit: int
    ) -> list[StoredMessage]:
        return await composed_reads.recent(self, key, principal, limit)

    async def _history(self, key: ConversationKey, principal: str) -> list[StoredMessage]:
        return await composed_reads.history(self, key, principal)

    async def _tail(
        self, key: ConversationKey, principal: str, limit: int
    ) -> ConversationTail | None:
        return await composed_reads.tail(self, key, principal, limit)

    @abstractmethod
    async def _read_messages(
        self, key: ConversationKey, principal: str, start: int, limit: int | None
    ) -> list[StoredMessage]: ...

    @abstractmethod
    async def _get_conversation(
        self, key: ConversationKey, principal: str
    ) -> ConversationInfo | None: ...

    @abstractmethod
    async def _list_conversations(
        self, tenant: str, principal: str, limit: int, cursor: str | None
    ) -> Page: ...

    @abstractmethod
    async def _find_sweepable(self, rule: SweepRule, limit: int) -> list[ConversationKey]: ...


def cut_position(seq: int, role: str, cut: Cut) -> int:
    """The first position ``truncate`` removes, for the message at ``seq`` with ``role``."""
    if cut == "before" or (cut == "by_role" and role == "user"):
        return seq
    return seq + 1


def _check_status(status: object) -> None:
    if status not in LAST_TURN_STATUSES:
        raise UsageError(
            f"unknown last turn status {status!r}; expected one of {sorted(LAST_TURN_STATUSES)}"
        )


def _check_title(title: object) -> None:
    if title is None:
        return
    if not isinstance(title, str) or "\x00" in title or len(title) > MAX_TITLE_CHARS:
        raise UsageError(f"title must be a str without NUL, at most {MAX_TITLE_CHARS} chars")
    check_text(title, "title")
