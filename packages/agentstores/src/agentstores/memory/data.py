"""The in-memory backend's data: one ``MemoryData`` per ``memory://<name>`` in a process."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ..errors import Refusal, refusal_error
from ..keys import ConversationKey
from ..models import (
    ClientInfo,
    LastTurnStatus,
    RecordedEvent,
    Role,
    SupervisionRow,
    UserIntegration,
)
from ..stores import kit
from ..stores.kit import can_read, check_write, judge_write, raised_fence
from ..stores.wakeups import Wakeups


@dataclass
class Header:
    """The key header of docs/semantics.md: owner, fence, shares, tombstone."""

    owner: str
    fence: int = 0
    shared_with: set[str] = field(default_factory=set)
    erased_until: datetime | None = None

    @property
    def erased(self) -> bool:
        """True when the key is erased (the header is a tombstone)."""
        return self.erased_until is not None


@dataclass
class StoredRecord:
    """A recording's latest event, its message kept as JSON so every read returns a fresh copy."""

    event: RecordedEvent
    message_json: bytes


@dataclass
class MessageRow:
    """One transcript message as stored, content and metadata kept as JSON."""

    id: str
    role: Role
    content_json: bytes
    metadata_json: bytes
    compaction: bool
    created_at: datetime


@dataclass
class ConversationRecord:
    """One conversation's metadata and transcript, indexed by message id and by speaker."""

    owner: str
    created_at: datetime
    updated_at: datetime
    title: str | None = None
    expires_at: datetime | None = None
    last_turn_status: LastTurnStatus | None = None
    metadata: dict[str, bytes] = field(default_factory=dict)
    """Conversation metadata: name -> canonical JSON of its value."""
    messages: list[MessageRow] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    positions: dict[str, list[int]] = field(
        default_factory=lambda: {"user": [], "assistant": [], "turns": []}
    )
    """Positions of user, assistant and user-or-assistant messages: indexed reads by
    speaker and ``recent`` never walk the transcript."""

    @property
    def tail(self) -> str | None:
        """The id of the last message, or None when the transcript is empty."""
        return self.messages[-1].id if self.messages else None

    def add(self, row: MessageRow) -> int:
        """Append ``row`` to the transcript and its indexes; return its position."""
        seq = len(self.messages)
        self.messages.append(row)
        self.ids.add(row.id)
        if row.role in ("user", "assistant"):
            self.positions[row.role].append(seq)
            self.positions["turns"].append(seq)
        return seq

    def cut(self, length: int) -> list[MessageRow]:
        """Drop every message from position ``length`` on; return what was dropped."""
        removed = self.messages[length:]
        del self.messages[length:]
        for row in removed:
            self.ids.discard(row.id)
        for name, kept in self.positions.items():
            self.positions[name] = [p for p in kept if p < length]
        return removed


@dataclass
class Token:
    """One pause token: owner, payload, expiry, and whether it is pending, claimed or abandoned."""

    owner: str
    payload_json: bytes
    expires_at: datetime
    status: str = "pending"


class MemoryData:
    """Every record of one in-memory backend. Stores mutate it without awaiting in
    between, so each call is atomic with respect to other asyncio tasks."""

    def __init__(
        self, clock: Callable[[], datetime] | None = None, tombstone_ttl: timedelta | None = None
    ) -> None:
        self.clock = clock or (lambda: datetime.now(UTC))
        self.tombstone_ttl = kit.tombstone_ttl(tombstone_ttl)
        self.headers: dict[ConversationKey, Header] = {}
        self.supervision: dict[ConversationKey, SupervisionRow] = {}
        self.recording: dict[ConversationKey, StoredRecord] = {}
        self.state: dict[ConversationKey, bytes] = {}
        self.conversations: dict[ConversationKey, ConversationRecord] = {}
        self.tokens: dict[tuple[ConversationKey, str], Token] = {}
        self.integrations: dict[tuple[str, str, str], UserIntegration] = {}
        self.wakeups = Wakeups()
        """Shared by every bundle on this data: each one's writes wake all their
        followers (in-process, so every write of the backend is heard)."""
        self.wakeups.remote = True
        self.client_info: dict[tuple[str, str], ClientInfo] = {}

    def now(self) -> datetime:
        """The store's clock: the ``clock`` option, else UTC wall time."""
        return self.clock()

    def with_options(
        self, *, clock: Callable[[], datetime] | None, tombstone_ttl: timedelta | None
    ) -> MemoryData:
        """This data seen through another clock or tombstone TTL: the records are shared,
        only the options differ (``self`` when they do not)."""
        same_clock = clock is None or clock is self.clock
        same_ttl = tombstone_ttl is None or tombstone_ttl == self.tombstone_ttl
        if same_clock and same_ttl:
            return self
        view = copy.copy(self)
        view.clock = clock or self.clock
        view.tombstone_ttl = self.tombstone_ttl if tombstone_ttl is None else tombstone_ttl
        return view

    # --- the key header ---------------------------------------------------------

    def header(self, key: ConversationKey) -> Header | None:
        """The live header, dropping a tombstone whose retention has passed."""
        h = self.headers.get(key)
        if h is not None and h.erased_until is not None and h.erased_until <= self.now():
            del self.headers[key]
            return None
        return h

    def is_erased(self, key: ConversationKey) -> bool:
        """True when ``key`` is a tombstone still within its retention."""
        h = self.header(key)
        return h is not None and h.erased

    def refuse_if_erased(self, key: ConversationKey) -> None:
        """Raise ``ErasedError`` (with ``until``) when ``key`` is a live tombstone."""
        h = self.header(key)
        if h is not None and h.erased_until is not None:
            raise refusal_error(Refusal.ERASED, key=key, until=h.erased_until)

    def visible(self, key: ConversationKey, principal: str) -> bool:
        """Whether ``principal`` may read ``key``: it exists, is not erased, is theirs or shared."""
        h = self.header(key)
        if h is None:
            return False
        return can_read(
            owner=h.owner, shared_with=h.shared_with, erased=h.erased, principal=principal
        )

    def judge_write(
        self, key: ConversationKey, principal: str, epoch: int | None
    ) -> Refusal | None:
        """The key-header rule for a write by ``principal`` at ``epoch``."""
        h = self.header(key)
        if h is None:
            return None
        return judge_write(
            owner=h.owner, fence=h.fence, erased=h.erased, principal=principal, epoch=epoch
        )

    def check_write(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        """Raise the key-header rule's refusal, if any, as its typed error."""
        h = self.header(key)
        if h is not None:
            check_write(
                key,
                owner=h.owner,
                fence=h.fence,
                erased=h.erased,
                principal=principal,
                epoch=epoch,
                erased_until=h.erased_until,
            )

    def commit_write(self, key: ConversationKey, principal: str, epoch: int | None) -> Header:
        """Claim the key if unowned and raise its fence to ``epoch``."""
        h = self.header(key)
        if h is None:
            h = Header(owner=principal)
            self.headers[key] = h
        h.fence = raised_fence(h.fence, epoch)
        return h

    def erase(self, key: ConversationKey) -> None:
        """Remove every store's data for ``key`` and leave a tombstone."""
        self.supervision.pop(key, None)
        self.recording.pop(key, None)
        self.state.pop(key, None)
        self.conversations.pop(key, None)
        for token_key in [t for t in self.tokens if t[0] == key]:
            del self.tokens[token_key]
        h = self.headers.get(key)
        if h is not None:
            h.shared_with.clear()
            h.erased_until = self.now() + self.tombstone_ttl


_registry: dict[str, MemoryData] = {}
_registry_lock = threading.Lock()


def shared_data(name: str, **options: object) -> MemoryData:
    """The one ``MemoryData`` for ``memory://<name>`` in this process."""
    with _registry_lock:
        data = _registry.get(name)
        if data is None:
            data = MemoryData(**options)  # type: ignore[arg-type]
            _registry[name] = data
        return data


def forget(name: str) -> None:
    """Drop the data of ``memory://<name>``, so the next bundle for that name starts empty."""
    with _registry_lock:
        _registry.pop(name, None)
