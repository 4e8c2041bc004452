"""Broken backends whose bug is a lifetime: each is the in-memory reference with ONE
expiry or retention rule wrong, judged at the wrong instant or on the wrong clock."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from agentstores.errors import AlreadyClaimedError, ExpiredError
from agentstores.keys import ConversationKey
from agentstores.memory.data import ConversationRecord, Header, MemoryData
from agentstores.memory.stores import (
    MemoryAgentStateStore,
    MemoryConversationStore,
    MemoryOAuthStore,
    MemoryPauseTokenStore,
    MemorySupervisionStore,
)
from agentstores.models import (
    StoredMessage,
    SupervisionRow,
    SupervisionView,
    UserIntegration,
)
from agentstores.stores import AppendRequest, Expired, IdleFor, SweepRule
from agentstores_contract import BackendUnderTest
from tests.catalogue.mutants import Mutant, _backend

MUTANTS: list[Mutant] = []
"""This track's mutants; filled at the bottom."""

# --- tombstones ---------------------------------------------------------------------


class TombstoneNeverExpires(MemoryData):
    """Keeps every tombstone for ever: an erased key can never be used again."""

    def header(self, key: ConversationKey) -> Header | None:
        return self.headers.get(key)


class TombstoneTtlAsMilliseconds(MemoryData):
    """Reads the TTL's seconds as milliseconds: tombstones lapse a thousand times early."""

    def erase(self, key: ConversationKey) -> None:
        ttl = self.tombstone_ttl
        self.tombstone_ttl = ttl / 1000
        try:
            super().erase(key)
        finally:
            self.tombstone_ttl = ttl


class TombstoneLapsesLate(MemoryData):
    """Drops a tombstone only after ``erased_until`` (``<``), not from it on."""

    def header(self, key: ConversationKey) -> Header | None:
        h = self.headers.get(key)
        if h is not None and h.erased_until is not None and h.erased_until < self.now():
            del self.headers[key]
            return None
        return h


class StateSaveJudgesTombstoneOnCallerClock(MemoryAgentStateStore):
    """Lets a state save through a tombstone that has lapsed on this machine's clock."""

    async def _save(
        self, key: ConversationKey, principal: str, blob: bytes, epoch: int | None
    ) -> None:
        h = self.data.headers.get(key)
        if h is not None and h.erased_until is not None and h.erased_until <= datetime.now(UTC):
            del self.data.headers[key]
        await super()._save(key, principal, blob, epoch)


# --- supervision -------------------------------------------------------------------


class HeartbeatToTheSecond(MemorySupervisionStore):
    """Reads ``heartbeat_at`` back cut to whole seconds (the seconds half of a server's
    ``TIME``): a live turn looks up to a second older and is taken over early."""

    async def _read(self, key: ConversationKey, principal: str) -> SupervisionView:
        view = await super()._read(key, principal)
        if view.row is None or view.row.heartbeat_at is None:
            return view
        cut = view.row.heartbeat_at.replace(microsecond=0)
        row: SupervisionRow = dataclasses.replace(view.row, heartbeat_at=cut)
        return dataclasses.replace(view, row=row)


# --- pause tokens -------------------------------------------------------------------


class TokenClaimableAtExpiry(MemoryPauseTokenStore):
    """Refuses a claim only after ``expires_at`` (``<``): claimable at the instant itself."""

    async def _claim(self, token_id: str, key: ConversationKey, principal: str) -> bytes:
        token = self._token(token_id, key, principal)
        if token.status != "pending":
            raise AlreadyClaimedError(f"pause token {token_id!r} is {token.status}", key=key)
        if token.expires_at < self.data.now():
            raise ExpiredError(f"pause token {token_id!r} expired", key=key)
        token.status = "claimed"
        return token.payload_json


# --- sweep rules --------------------------------------------------------------------


class ExpiredAfterExpiresAt(MemoryConversationStore):
    """``Expired()`` matches only after ``expires_at`` (``<``), not from it on."""

    def _matches(self, key: ConversationKey, conv: ConversationRecord, rule: SweepRule) -> bool:
        if isinstance(rule, Expired):
            return conv.expires_at is not None and conv.expires_at < self.data.now()
        return super()._matches(key, conv, rule)


class IdleSinceCreation(MemoryConversationStore):
    """``IdleFor`` measured from ``created_at``: a conversation still in use is swept."""

    def _matches(self, key: ConversationKey, conv: ConversationRecord, rule: SweepRule) -> bool:
        if isinstance(rule, IdleFor):
            return conv.created_at < self.data.now() - rule.duration
        return super()._matches(key, conv, rule)


class ExpiresAtSetOnlyOnCreate(MemoryConversationStore):
    """Takes ``expires_at`` from the append that creates the conversation and ignores
    later ones: a temporary conversation cannot be extended."""

    async def _append_messages(
        self, key: ConversationKey, principal: str, request: AppendRequest
    ) -> list[StoredMessage]:
        if key in self.data.conversations:
            request = dataclasses.replace(request, expires_at=None)
        return await super()._append_messages(key, principal, request)


# --- OAuth -------------------------------------------------------------------------


class PendingExpiryToTheSecond(MemoryOAuthStore):
    """Stores a pending authorization's ``expires_at`` cut to whole seconds (a column
    without fractions): it expires up to a second early."""

    async def _save_user_integration(self, record: UserIntegration) -> None:
        if record.pending is not None:
            cut = record.pending.expires_at.replace(microsecond=0)
            record = dataclasses.replace(
                record, pending=dataclasses.replace(record.pending, expires_at=cut)
            )
        await super()._save_user_integration(record)


# --- bundles ------------------------------------------------------------------------


def _with_data(cls: type[MemoryData]) -> BackendUnderTest:
    def swap(data: MemoryData) -> None:
        data.__class__ = cls

    return _backend(data_hook=swap)


def tombstone_never_expires() -> BackendUnderTest:
    return _with_data(TombstoneNeverExpires)


def tombstone_ttl_as_ms() -> BackendUnderTest:
    return _with_data(TombstoneTtlAsMilliseconds)


def tombstone_lapses_late() -> BackendUnderTest:
    return _with_data(TombstoneLapsesLate)


def state_save_caller_clock_tombstone() -> BackendUnderTest:
    return _backend(state=StateSaveJudgesTombstoneOnCallerClock)


def token_claimable_at_expiry() -> BackendUnderTest:
    return _backend(pause_tokens=TokenClaimableAtExpiry)


def expired_after_expires_at() -> BackendUnderTest:
    return _backend(conversations=ExpiredAfterExpiresAt)


def idle_since_creation() -> BackendUnderTest:
    return _backend(conversations=IdleSinceCreation)


def expires_at_set_only_on_create() -> BackendUnderTest:
    return _backend(conversations=ExpiresAtSetOnlyOnCreate)


def heartbeat_to_the_second() -> BackendUnderTest:
    return _backend(supervision=HeartbeatToTheSecond)


def pending_expiry_to_the_second() -> BackendUnderTest:
    return _backend(oauth=PendingExpiryToTheSecond)


def _m(name: str, breaks: str) -> Mutant:
    return Mutant(name, f"{__name__}:{name}", breaks)


MUTANTS.extend(
    [
        _m("tombstone_never_expires", "lifetimes.tombstone"),
        _m("tombstone_ttl_as_ms", "lifetimes.tombstone"),
        _m("tombstone_lapses_late", "lifetimes.tombstone"),
        _m("state_save_caller_clock_tombstone", "lifetimes.tombstone"),
        _m("token_claimable_at_expiry", "lifetimes.pause_token"),
        _m("expired_after_expires_at", "lifetimes.expired"),
        _m("idle_since_creation", "lifetimes.idle"),
        _m("expires_at_set_only_on_create", "lifetimes.expired"),
        _m("pending_expiry_to_the_second", "lifetimes.oauth_pending"),
        _m("heartbeat_to_the_second", "lifetimes.liveness"),
    ]
)
