"""A pure, synchronous model of the conversation-keyed stores (docs/semantics.md).

The state machines run every call against a real bundle and against this model and
compare outcomes: the same value, or an error of the class the model raises (a
subclass is accepted). Times are the store's business: the model keeps the timestamps
the store returned and never invents one.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentstores.errors import (
    AlreadyClaimedError,
    ConflictError,
    ErasedError,
    ExpiredError,
    FencedError,
    NotFoundError,
    NotOwnedError,
    StaleWriteError,
    UsageError,
)
from agentstores.keys import ConversationKey
from agentstores.models import SPEAKERS, ClientInfo, UserIntegration
from agentstores.stores import UNSET


def merged(current: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    """The conversation metadata after a shallow merge: None removes a name."""
    out = copy.deepcopy(current)
    for name, value in updates.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = copy.deepcopy(value)
    return out


def metadata_view(metadata: Any) -> tuple[tuple[str, str], ...]:
    """Conversation metadata as comparable, hashable text (``1`` and ``1.0`` differ)."""
    return tuple(sorted((name, json.dumps(v, sort_keys=True)) for name, v in metadata.items()))


@dataclass
class MessageModel:
    id: str
    role: str
    content: Any
    metadata: dict[str, Any]
    compaction: bool
    created_at: datetime | None = None


@dataclass
class ConversationModel:
    owner: str
    messages: list[MessageModel] = field(default_factory=list)
    title: str | None = None
    expires_at: datetime | None = None
    last_turn_status: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    """As the store reported it when first observed; never changes afterwards."""
    updated_at: datetime | None = None
    """As last observed."""
    touched: bool = True
    """A write since the last observation must have moved ``updated_at`` to the store's
    time of that write; without one, ``updated_at`` must not have moved at all."""

    @property
    def tail(self) -> str | None:
        return self.messages[-1].id if self.messages else None

    def position(self, message_id: str) -> int | None:
        for i, m in enumerate(self.messages):
            if m.id == message_id:
                return i
        return None


@dataclass
class TokenModel:
    payload: Any
    expired: bool
    status: str = "pending"


@dataclass
class KeyModel:
    """Everything stored under one key, and its header."""

    owner: str | None = None
    fence: int = 0
    shared: set[str] = field(default_factory=set)
    erased: bool = False
    supervision: tuple[str, str, int] | None = None
    recording: tuple[int, Any, str, int] | None = None
    state: dict[str, Any] | None = None
    conversation: ConversationModel | None = None
    tokens: dict[str, TokenModel] = field(default_factory=dict)

    def visible_to(self, principal: str) -> bool:
        if self.owner is None or self.erased:
            return False
        return principal == self.owner or principal in self.shared


class StoresModel:
    """The sequential specification of one backend's conversation-keyed data."""

    def __init__(self) -> None:
        self.keys: dict[ConversationKey, KeyModel] = {}

    def at(self, key: ConversationKey) -> KeyModel:
        if key not in self.keys:
            self.keys[key] = KeyModel()
        return self.keys[key]

    # --- the header -------------------------------------------------------------

    @staticmethod
    def _check_write(k: KeyModel, principal: str, epoch: int | None) -> None:
        if k.erased:
            raise ErasedError()
        if k.owner is not None and k.owner != principal:
            raise NotOwnedError()
        if epoch is not None and epoch < k.fence:
            raise FencedError()

    @staticmethod
    def _commit(k: KeyModel, principal: str, epoch: int | None) -> None:
        if k.owner is None:
            k.owner = principal
        if epoch is not None and epoch > k.fence:
            k.fence = epoch

    # --- supervision --------------------------------------------------------------

    def supervision_cas(
        self, key: ConversationKey, principal: str, expected: int | None, row: tuple[str, str, int]
    ) -> bool:
        k = self.at(key)
        if k.erased:
            return False
        if k.owner is not None and k.owner != principal:
            raise NotOwnedError()
        if row[2] < k.fence:
            return False
        current = k.supervision
        if expected is None and current is not None:
            return False
        if expected is not None and (current is None or current[2] != expected):
            return False
        self._commit(k, principal, row[2])
        k.supervision = row
        return True

    def supervision_read(
        self, key: ConversationKey, principal: str
    ) -> tuple[tuple[str, str, int, str] | None, int]:
        k = self.at(key)
        if not k.visible_to(principal):
            return None, 0
        row = k.supervision
        assert k.owner is not None
        return (None if row is None else (*row, k.owner)), k.fence

    def supervision_delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int
    ) -> bool:
        k = self.at(key)
        if k.owner is None or k.erased:
            return False
        self._check_write(k, principal, None)
        if k.supervision is None or k.supervision[1:] != (message_id, epoch):
            return False
        k.supervision = None
        return True

    # --- recording ----------------------------------------------------------------

    def recording_put(
        self, key: ConversationKey, principal: str, event: tuple[int, Any, str, int]
    ) -> bool:
        index, message, message_id, epoch = event
        k = self.at(key)
        self._check_write(k, principal, epoch)
        if k.recording is not None:
            s_index, _, s_mid, s_epoch = k.recording
            if epoch < s_epoch:
                raise FencedError()
            if s_mid == message_id and s_epoch == epoch and index < s_index:
                return False
        self._commit(k, principal, epoch)
        k.recording = (index, copy.deepcopy(message), message_id, epoch)
        return True

    def recording_read(
        self, key: ConversationKey, principal: str
    ) -> tuple[int, Any, str, int] | None:
        k = self.at(key)
        return k.recording if k.visible_to(principal) else None

    def recording_delete(
        self, key: ConversationKey, principal: str, message_id: str, epoch: int | None
    ) -> bool:
        k = self.at(key)
        if k.owner is None:
            return False
        self._check_write(k, principal, epoch)
        self._commit(k, principal, epoch)
        if k.recording is None or k.recording[2] != message_id:
            return False
        k.recording = None
        return True

    # --- agent state --------------------------------------------------------------

    def state_load(self, key: ConversationKey, principal: str) -> dict[str, Any]:
        k = self.at(key)
        if not k.visible_to(principal) or k.state is None:
            return {}
        return k.state

    def state_save(
        self, key: ConversationKey, principal: str, state: dict[str, Any], epoch: int | None
    ) -> None:
        k = self.at(key)
        self._check_write(k, principal, epoch)
        self._commit(k, principal, epoch)
        k.state = copy.deepcopy(state)

    def state_delete(self, key: ConversationKey, principal: str, epoch: int | None) -> None:
        k = self.at(key)
        if k.owner is None:
            return
        self._check_write(k, principal, epoch)
        self._commit(k, principal, epoch)
        k.state = None

    # --- conversations --------------------------------------------------------------

    def _owned(self, key: ConversationKey, principal: str, epoch: int | None) -> ConversationModel:
        k = self.at(key)
        if k.erased:
            raise ErasedError()
        if k.conversation is None:
            raise NotFoundError()
        self._check_write(k, principal, epoch)
        return k.conversation

    def readable(self, key: ConversationKey, principal: str) -> ConversationModel | None:
        k = self.at(key)
        return k.conversation if k.visible_to(principal) else None

    def append(
        self,
        key: ConversationKey,
        principal: str,
        messages: list[MessageModel],
        *,
        create_if_absent: bool = True,
        last_turn_status: str | None = None,
        expected_tail: Any = UNSET,
        epoch: int | None = None,
        title: str | None = None,
        expires_at: datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> list[tuple[str, int]]:
        """Returns ``(message id, seq)`` of every message appended."""
        k = self.at(key)
        if k.erased:
            raise ErasedError()
        conv = k.conversation
        if conv is None and not create_if_absent:
            raise NotFoundError()
        self._check_write(k, principal, epoch)
        present = {m.id for m in conv.messages} if conv is not None else set()
        fresh = [m for m in messages if m.id not in present]
        if messages and not fresh:
            return []
        if expected_tail is not UNSET:
            tail = conv.tail if conv is not None else None
            if tail != expected_tail:
                raise StaleWriteError()
        if conv is None:
            conv = k.conversation = ConversationModel(owner=principal)
        self._commit(k, principal, epoch)
        conv.touched = True
        out = []
        for m in fresh:
            conv.messages.append(copy.deepcopy(m))
            out.append((m.id, len(conv.messages) - 1))
        if last_turn_status is not None:
            conv.last_turn_status = last_turn_status
        if title is not None:
            conv.title = title
        if expires_at is not None:
            conv.expires_at = expires_at
        if metadata is not None:
            conv.metadata = merged(conv.metadata, metadata)
        return out

    def set_last_turn_status(
        self, key: ConversationKey, principal: str, status: str, epoch: int | None
    ) -> None:
        k = self.at(key)
        if k.conversation is None or k.erased:
            return
        self._check_write(k, principal, epoch)
        k.conversation.last_turn_status = status
        k.conversation.touched = True
        self._commit(k, principal, epoch)

    def set_title(
        self, key: ConversationKey, principal: str, title: str | None, epoch: int | None
    ) -> None:
        conv = self._owned(key, principal, epoch)
        conv.title = title
        conv.touched = True
        self._commit(self.at(key), principal, epoch)

    def set_metadata(
        self, key: ConversationKey, principal: str, updates: dict[str, Any], epoch: int | None
    ) -> None:
        conv = self._owned(key, principal, epoch)
        conv.metadata = merged(conv.metadata, updates)
        conv.touched = True
        self._commit(self.at(key), principal, epoch)

    def set_shared(self, key: ConversationKey, principal: str, other: str, shared: bool) -> None:
        self._owned(key, principal, None)
        k = self.at(key)
        if shared:
            k.shared.add(other)
        else:
            k.shared.discard(other)

    def truncate(
        self,
        key: ConversationKey,
        principal: str,
        message_id: str,
        epoch: int | None,
        how: str = "by_role",
        expected_tail: str | None = None,
    ) -> int:
        conv = self._owned(key, principal, epoch)
        if expected_tail is not None and conv.tail != expected_tail:
            raise StaleWriteError()
        at = conv.position(message_id)
        if at is None:
            raise NotFoundError()
        goes = how == "before" or (how == "by_role" and conv.messages[at].role == "user")
        cut = at if goes else at + 1
        removed = len(conv.messages) - cut
        del conv.messages[cut:]
        conv.touched = True
        self._commit(self.at(key), principal, epoch)
        return removed

    def branch(
        self, key: ConversationKey, principal: str, message_id: str, new_key: ConversationKey
    ) -> list[MessageModel]:
        """Returns the copied prefix (ids still the source's: the store picks new ones)."""
        source = self.readable(key, principal)
        if source is None:
            raise NotFoundError()
        at = source.position(message_id)
        if at is None:
            raise NotFoundError()
        target = self.at(new_key)
        if target.owner is not None:
            raise ConflictError()
        prefix = copy.deepcopy(source.messages[: at + 1])
        self._commit(target, principal, None)
        target.conversation = ConversationModel(
            owner=principal, title=source.title, metadata=copy.deepcopy(source.metadata)
        )
        target.conversation.messages = prefix
        return prefix

    def erase(self, key: ConversationKey, principal: str) -> bool:
        k = self.at(key)
        if k.owner is None or k.erased:
            return False
        if k.owner != principal:
            raise NotOwnedError()
        owner, fence = k.owner, k.fence
        self.keys[key] = KeyModel(owner=owner, fence=fence, erased=True)
        return True

    def transcript(
        self,
        key: ConversationKey,
        principal: str,
        *,
        index: int | None = None,
        time_range: tuple[datetime, datetime] | None = None,
        speaker: str = "all",
        limit: int | None = None,
    ) -> list[tuple[int, str, Any, str]]:
        """``(index, role, content, message_id)`` rows of ``get_transcript``."""
        if speaker not in SPEAKERS:
            raise UsageError()
        if index is not None and time_range is not None:
            raise UsageError()
        conv = self.readable(key, principal)
        if conv is None or limit == 0:
            return []
        view = [m for m in conv.messages if speaker == "all" or m.role == speaker]
        rows = list(enumerate(view))
        if index is not None:
            i = index + len(view) if index < 0 else index
            rows = [rows[i]] if 0 <= i < len(view) else []
        elif time_range is not None:
            start, end = time_range
            rows = [
                (i, m) for i, m in rows if m.created_at is not None and start <= m.created_at <= end
            ]
        if limit is not None:
            rows = rows[:limit]
        return [(i, m.role, m.content, m.id) for i, m in rows]

    def recent(self, key: ConversationKey, principal: str, limit: int) -> list[tuple[int, str]]:
        """``(seq, id)`` of the last ``limit`` user/assistant messages."""
        conv = self.readable(key, principal)
        if conv is None or limit == 0:
            return []
        turns = [(s, m.id) for s, m in enumerate(conv.messages) if m.role in ("user", "assistant")]
        return turns[-limit:]

    def tail(self, key: ConversationKey, principal: str, limit: int) -> tuple[Any, ...] | None:
        """``(info, [(seq, id), ...])``: the metadata and the last ``limit`` rows."""
        conv = self.readable(key, principal)
        if conv is None:
            return None
        start = max(0, len(conv.messages) - limit)
        rows = [(s, conv.messages[s].id) for s in range(start, len(conv.messages))]
        return self.info(key, principal), rows

    def history(self, key: ConversationKey, principal: str) -> list[tuple[int, str]]:
        conv = self.readable(key, principal)
        if conv is None:
            return []
        start = 0
        for s, m in enumerate(conv.messages):
            if m.compaction:
                start = s
        return [(s, m.id) for s, m in enumerate(conv.messages) if s >= start]

    def info(self, key: ConversationKey, principal: str) -> tuple[Any, ...] | None:
        """``(owner, title, expires_at, last_turn_status, tail, count, shared_with,
        metadata)``, the metadata as :func:`metadata_view` gives it."""
        conv = self.readable(key, principal)
        if conv is None:
            return None
        k = self.at(key)
        return (
            conv.owner,
            conv.title,
            conv.expires_at,
            conv.last_turn_status,
            conv.tail,
            len(conv.messages),
            frozenset(k.shared),
            metadata_view(conv.metadata),
        )

    # --- pause tokens ---------------------------------------------------------------

    def token_put(
        self,
        token_id: str,
        key: ConversationKey,
        principal: str,
        payload: Any,
        expired: bool,
        epoch: int | None,
    ) -> None:
        k = self.at(key)
        self._check_write(k, principal, epoch)
        if token_id in k.tokens:
            raise ConflictError()
        self._commit(k, principal, epoch)
        k.tokens[token_id] = TokenModel(copy.deepcopy(payload), expired)

    def _token(self, token_id: str, key: ConversationKey, principal: str) -> TokenModel:
        k = self.at(key)
        token = k.tokens.get(token_id)
        if k.owner is None or k.erased or k.owner != principal or token is None:
            raise NotFoundError()
        return token

    def token_claim(self, token_id: str, key: ConversationKey, principal: str) -> Any:
        token = self._token(token_id, key, principal)
        if token.status != "pending":
            raise AlreadyClaimedError()
        if token.expired:
            raise ExpiredError()
        token.status = "claimed"
        return token.payload

    def token_abandon(self, token_id: str, key: ConversationKey, principal: str) -> None:
        self._token(token_id, key, principal).status = "abandoned"


class OAuthModel:
    """Last-write-wins records; lookups by key and by pending state across users."""

    def __init__(self) -> None:
        self.integrations: dict[tuple[str, str, str], UserIntegration] = {}
        self.clients: dict[tuple[str, str], ClientInfo] = {}

    def save_integration(self, record: UserIntegration) -> None:
        self.integrations[(record.tenant, record.user, record.server_name)] = record

    def delete_integration(self, tenant: str, user: str, server: str) -> bool:
        return self.integrations.pop((tenant, user, server), None) is not None

    def list_integrations(
        self, tenant: str, user: str, servers: list[str] | None
    ) -> list[UserIntegration]:
        found = [
            r
            for (t, u, s), r in self.integrations.items()
            if t == tenant and u == user and (servers is None or s in servers)
        ]
        return sorted(found, key=lambda r: r.server_name)

    def by_state(self, state: str) -> list[UserIntegration]:
        """Every record whose pending authorization has ``state`` (the store returns one)."""
        return [
            r
            for r in self.integrations.values()
            if r.pending is not None and r.pending.state == state
        ]

    def save_client(self, record: ClientInfo) -> None:
        self.clients[(record.tenant, record.server_name)] = record

    def list_clients(self, tenant: str, servers: list[str] | None) -> list[ClientInfo]:
        found = [
            r
            for (t, s), r in self.clients.items()
            if t == tenant and (servers is None or s in servers)
        ]
        return sorted(found, key=lambda r: r.server_name)
