"""Value types shared by every store. Plain frozen dataclasses: no driver types leak out."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from .errors import AgentStoresError, UsageError
from .keys import ConversationKey, validate_id

JSON = Any
"""Any value ``json.dumps`` accepts (dict, list, str, int, float, bool, None)."""

SupervisionStatus = Literal["running", "done", "errored"]
Role = Literal["user", "assistant", "tool", "system", "other"]
Speaker = Literal["user", "assistant", "all"]
LastTurnStatus = Literal["running", "complete", "errored", "cancelled"]

ROLES: frozenset[str] = frozenset(get_args(Role))
SPEAKERS: frozenset[str] = frozenset(get_args(Speaker))
LAST_TURN_STATUSES: frozenset[str] = frozenset(get_args(LastTurnStatus))
SUPERVISION_STATUSES: frozenset[str] = frozenset(get_args(SupervisionStatus))

MAX_COUNTER = 2**63 - 1
"""The largest epoch, index or limit: a signed 64-bit integer, the widest that every
backend stores and compares exactly (PostgreSQL ``bigint``)."""


def check_counter(value: object, what: str) -> int:
    """``value`` as a non-negative int of at most :data:`MAX_COUNTER`, else UsageError."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNTER:
        raise UsageError(f"{what} must be an int from 0 to 2**63 - 1, got {value!r}")
    return value


# --- supervision -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SupervisionRow:
    """The one row per conversation that says who produces.

    ``heartbeat_at`` and ``owner`` are stamped by the store on every write (store clock,
    acting principal); whatever the caller passes there is ignored.
    """

    status: SupervisionStatus
    message_id: str
    epoch: int
    heartbeat_at: datetime | None = None
    owner: str = ""

    def __post_init__(self) -> None:
        if self.status not in SUPERVISION_STATUSES:
            raise UsageError(f"unknown supervision status {self.status!r}")
        validate_id(self.message_id, "message_id")
        check_counter(self.epoch, "epoch")


@dataclass(frozen=True, slots=True)
class SupervisionView:
    """What ``SupervisionStore.read`` returns: unpacks as ``row, now``.

    ``fence`` is the highest epoch the key has seen in any store (0 if none): a new
    lease after the row was deleted must take an epoch above it.
    """

    row: SupervisionRow | None
    now: datetime
    fence: int = 0

    def __iter__(self) -> Iterator[Any]:
        yield self.row
        yield self.now


@dataclass(frozen=True, slots=True)
class Swap:
    """One row of ``SupervisionStore.compare_and_swap_many``: the arguments of one
    ``compare_and_swap`` (``principal`` acting on ``key``: write ``row`` iff the current
    epoch is ``expected_epoch``)."""

    key: ConversationKey
    principal: str
    expected_epoch: int | None
    row: SupervisionRow


@dataclass(frozen=True, slots=True)
class SwapOutcome:
    """What one :class:`Swap` of a batch did: ``swapped`` as ``compare_and_swap`` would
    return it, or the typed ``error`` it would have raised (``NotOwnedError``,
    ``UnknownOutcomeError``, ``BackendUnavailableError``, ...)."""

    swapped: bool
    error: AgentStoresError | None = None

    def result(self) -> bool:
        """``swapped``, or raise ``error``: what the single ``compare_and_swap`` gives."""
        if self.error is not None:
            raise self.error
        return self.swapped


# --- recording --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """The latest cumulative snapshot of an in-flight answer."""

    index: int
    message: JSON
    message_id: str
    epoch: int

    def __post_init__(self) -> None:
        validate_id(self.message_id, "message_id")
        check_counter(self.index, "index")
        check_counter(self.epoch, "epoch")


# --- conversations ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """A message to append. ``seq`` and ``created_at`` are assigned by the store."""

    id: str
    role: Role
    content: JSON
    metadata: Mapping[str, JSON] = field(default_factory=dict)
    compaction: bool = False

    def __post_init__(self) -> None:
        validate_id(self.id, "message id")
        if self.role not in ROLES:
            raise UsageError(f"unknown role {self.role!r}; expected one of {sorted(ROLES)}")
        if not isinstance(self.metadata, Mapping):
            raise UsageError(
                f"message metadata must be a mapping, got {type(self.metadata).__name__}"
            )
        if not isinstance(self.compaction, bool):
            raise UsageError(f"compaction must be a bool, got {type(self.compaction).__name__}")

    @classmethod
    def user(
        cls, text: JSON, *, id: str | None = None, metadata: Mapping[str, JSON] | None = None
    ) -> Message:
        """A user message with a fresh id (or ``id``, to make a retried send a no-op)."""
        return cls(new_message_id() if id is None else id, "user", text, dict(metadata or {}))

    @classmethod
    def assistant(
        cls, content: JSON, *, id: str | None = None, metadata: Mapping[str, JSON] | None = None
    ) -> Message:
        """An assistant message with a fresh id (or ``id``)."""
        return cls(
            new_message_id() if id is None else id, "assistant", content, dict(metadata or {})
        )

    @classmethod
    def system(
        cls, text: JSON, *, id: str | None = None, metadata: Mapping[str, JSON] | None = None
    ) -> Message:
        """A system message with a fresh id (or ``id``)."""
        return cls(new_message_id() if id is None else id, "system", text, dict(metadata or {}))

    @classmethod
    def tool(
        cls,
        content: JSON,
        *,
        call_id: str | None = None,
        name: str | None = None,
        id: str | None = None,
        metadata: Mapping[str, JSON] | None = None,
    ) -> Message:
        """A tool result with a fresh id; ``call_id`` and ``name`` (the tool call it
        answers) go into the metadata as ``tool_call_id`` and ``tool_name``."""
        meta = dict(metadata or {})
        if call_id is not None:
            meta["tool_call_id"] = call_id
        if name is not None:
            meta["tool_name"] = name
        return cls(new_message_id() if id is None else id, "tool", content, meta)


def new_message_id() -> str:
    """A fresh message id: 32 hex digits from a random UUID."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored: its 0-based position ``seq`` and the store-clock ``created_at``."""

    id: str
    role: Role
    content: JSON
    metadata: Mapping[str, JSON]
    compaction: bool
    seq: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class TranscriptMessage:
    """One row of ``get_transcript``: a :class:`StoredMessage`'s ``id``, ``role``,
    ``content`` and ``created_at``, with ``index`` counted within the speaker-filtered
    view (``seq`` counts in the whole transcript)."""

    index: int
    role: Role
    content: JSON
    id: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """A conversation's metadata (what listing returns).

    ``metadata`` holds the application's conversation-level fields (an agent's
    identifier, its parameters, the user's context): set with ``append_messages(...,
    metadata=...)`` or ``set_metadata``, shallow-merged, copied by a branch.
    """

    key: ConversationKey
    owner: str
    title: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    last_turn_status: LastTurnStatus | None
    tail_message_id: str | None
    message_count: int
    shared_with: frozenset[str] = frozenset()
    metadata: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConversationTail:
    """A conversation's metadata and its last rows, read together as one snapshot:
    ``messages`` are the rows at positions ``info.message_count - len(messages)`` to
    ``info.message_count - 1``, oldest first, the last one the tail ``info`` names.

    What a framework that keeps its own history in a conversation reads to continue it:
    the last rows, and the tail its next append is conditioned on.
    """

    info: ConversationInfo
    messages: list[StoredMessage]


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a keyset listing; pass ``next_cursor`` back for the next page."""

    items: list[ConversationInfo]
    next_cursor: str | None


# --- OAuth ------------------------------------------------------------------------


# Every adapter that stores these records as JSON stores the form ``to_json`` gives and
# reads it back with ``from_json``: one encoding, so a record moves between backends as is.


@dataclass(frozen=True, slots=True)
class PendingAuthorization:
    """An OAuth authorization-code flow in flight, waiting for its browser callback."""

    state: str
    auth_url: str
    code_verifier: str
    token_endpoint: str
    redirect_uri: str
    expires_at: datetime
    resource: str | None = None

    def to_json(self) -> dict[str, JSON]:
        """The stored JSON form: every field by name, ``expires_at`` in ISO 8601 (exact
        to the microsecond, its UTC offset kept)."""
        return {
            "state": self.state,
            "auth_url": self.auth_url,
            "code_verifier": self.code_verifier,
            "token_endpoint": self.token_endpoint,
            "redirect_uri": self.redirect_uri,
            "expires_at": self.expires_at.isoformat(),
            "resource": self.resource,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> PendingAuthorization:
        """The pending authorization :meth:`to_json` encoded."""
        return cls(
            state=data["state"],
            auth_url=data["auth_url"],
            code_verifier=data["code_verifier"],
            token_endpoint=data["token_endpoint"],
            redirect_uri=data["redirect_uri"],
            expires_at=datetime.fromisoformat(data["expires_at"]),
            resource=data["resource"],
        )


@dataclass(frozen=True, slots=True)
class UserIntegration:
    """Per ``(tenant, user, server)``: an optional pending authorization and optional tokens."""

    tenant: str
    user: str
    server_name: str
    pending: PendingAuthorization | None = None
    tokens: Mapping[str, JSON] | None = None

    def to_json(self) -> dict[str, JSON]:
        """The stored JSON form: ``tenant``, ``user``, ``server``, ``pending`` (see
        :meth:`PendingAuthorization.to_json`) and ``tokens``, either of the last two null."""
        return {
            "tenant": self.tenant,
            "user": self.user,
            "server": self.server_name,
            "pending": None if self.pending is None else self.pending.to_json(),
            "tokens": None if self.tokens is None else dict(self.tokens),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> UserIntegration:
        """The record :meth:`to_json` encoded."""
        pending = data["pending"]
        return cls(
            tenant=data["tenant"],
            user=data["user"],
            server_name=data["server"],
            pending=None if pending is None else PendingAuthorization.from_json(pending),
            tokens=data["tokens"],
        )


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Per ``(tenant, server)``: OAuth client registration data."""

    tenant: str
    server_name: str
    client_info: Mapping[str, JSON]

    def to_json(self) -> dict[str, JSON]:
        """The stored JSON form: ``tenant``, ``server`` and ``info``."""
        return {"tenant": self.tenant, "server": self.server_name, "info": dict(self.client_info)}

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> ClientInfo:
        """The record :meth:`to_json` encoded."""
        return cls(tenant=data["tenant"], server_name=data["server"], client_info=data["info"])
