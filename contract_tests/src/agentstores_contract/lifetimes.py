"""Lifetimes, judged on the store clock: how long a tombstone refuses writes, when a
pause token, a temporary conversation, an idle conversation and a pending OAuth
authorization expire, and when a silent producer's turn is dead.

On a backend with a settable clock each lifetime is checked at its exact boundary: the
last instant it holds and the first it no longer does. Elsewhere one real wait, on the
store clock, covers every lifetime at once, with a short tombstone TTL.
"""

from __future__ import annotations

import asyncio
import warnings
from abc import ABC, abstractmethod
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentstores.errors import BusyError, NotFoundError
from agentstores.keys import ConversationKey
from agentstores.models import Message, PendingAuthorization, SupervisionRow, UserIntegration
from agentstores.oauth import OAuthVault
from agentstores.protocol.lease import LeaseConfig, claim, liveness
from agentstores.stores import Capability, Expired, IdleFor, Stores

from .backend import BackendUnderTest
from .base import ContractBase
from .erasure import LATE_WRITES, NO_OP_AFTER_ERASURE, REFUSALS
from .promises import promise
from .scenarios import ABSENT_READS, TOKEN, populate, snapshot
from .strategies import fresh_tenant

TICK = timedelta(microseconds=1)
"""The finest step of a store clock: the boundary tests step across expiry by one."""
EXACT_LIFETIME = timedelta(hours=2)
"""Every lifetime on a settable clock (a tombstone TTL far from the 30-day default)."""
REAL_LIFETIMES = (timedelta(seconds=1.5), timedelta(seconds=4), timedelta(seconds=10))
"""Every lifetime on a real clock, per attempt: the one wait of the real-time checks. An
attempt whose checks ran past a lifetime (a loaded machine) judges nothing, so the next
attempt runs every check again with a longer lifetime; the last attempt's verdict stands."""
MARGIN = timedelta(milliseconds=50)
"""Waited past the latest deadline: store clocks round expiry to the millisecond."""
EPOCH = datetime(2001, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)
"""Where a settable store clock starts: far from this machine's clock, so a decision
taken on the caller's clock shows."""
OWNER = "owner"
SLOW = "the store clock ran past the lifetime before the checks finished: too slow to judge"


class ManualClock:
    """A store clock the test sets by hand."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self.at = start

    def __call__(self) -> datetime:
        return self.at


class Lifetime(ABC):
    """One lifetime: started, then checked alive before ``dead_from`` and dead from it.

    ``start`` sets ``alive_until`` (by when the checks of ``before`` must have run) and
    ``dead_from`` (the first instant it must be over); on a frozen clock they coincide.
    ``midway`` runs halfway through. The checks return problems instead of raising, so
    one real wait serves every lifetime and each promise reports its own.
    """

    promise: str

    def __init__(self, lifetime: timedelta) -> None:
        self.lifetime = lifetime
        self.tenant = fresh_tenant(f"-{type(self).__name__.lower()}")
        self.alive_until = self.dead_from = EPOCH

    def key(self, session_id: str) -> ConversationKey:
        return ConversationKey(self.tenant, session_id)

    @abstractmethod
    async def start(self, stores: Stores) -> None: ...

    async def midway(self, stores: Stores) -> None:
        return None

    @abstractmethod
    async def before(self, stores: Stores) -> list[str]: ...

    @abstractmethod
    async def after(self, stores: Stores) -> list[str]: ...


async def _outcome(call: Any, expected: object = None) -> str:
    """``"ok"`` when the call returns ``expected``, else what it did instead."""
    try:
        value = await call
    except Exception as exc:
        return f"raised {type(exc).__name__}"
    return "ok" if value == expected else f"returned {value!r}"


class Tombstone(Lifetime):
    """Erased at ``t``: every late write in every store refused until ``t + ttl``; from
    then on the key is used afresh (new owner, no fence, no old data)."""

    promise = "lifetimes.tombstone"

    def namesake(self, key: ConversationKey) -> ConversationKey:
        """``key``'s session id in another tenant."""
        return ConversationKey(self.tenant + "-namesake", key.session_id)

    async def start(self, stores: Stores) -> None:
        key = self.key("erased")
        await stores.conversations.append_messages(
            self.key("source"), OWNER, [Message("m", "user", 1)]
        )
        await populate(stores, key, OWNER, 7)
        # siblings erased just before, so their tombstones lapse first: reusing one key
        # must leave the others' lapsed tombstones alone (the same session id in another
        # tenant, too)
        for sibling in (self.key("erased-too"), self.namesake(key)):
            await populate(stores, sibling, OWNER, 3)
            assert await stores.conversations.delete(sibling, OWNER)
        erased_from = await stores.now()
        assert await stores.conversations.delete(key, OWNER), "setting up: delete failed"
        erased_by = await stores.now()
        self.alive_until, self.dead_from = erased_from + self.lifetime, erased_by + self.lifetime

    async def before(self, stores: Stores) -> list[str]:
        key, problems = self.key("erased"), []
        for name, write in LATE_WRITES.items():
            for who in (OWNER, "someone-else"):
                try:
                    result = await write(stores, key, who)
                except REFUSALS.get(name, (NotFoundError,)):
                    continue
                except Exception as exc:
                    if who == OWNER:
                        problems.append(f"late {name} raised {type(exc).__name__}")
                    continue
                if name not in NO_OP_AFTER_ERASURE and result is not False:
                    problems.append(f"late {name} by {who!r} was accepted before the TTL")
        seen = await snapshot(stores, key, OWNER)
        if seen != ABSENT_READS:
            problems.append(f"reads of the tombstone before its TTL are not absent: {seen}")
        return problems

    async def after(self, stores: Stores) -> list[str]:
        key, heir, problems = self.key("erased"), "heir", []
        if await snapshot(stores, key, OWNER) != ABSENT_READS:
            problems.append("old data is readable once the tombstone has passed")
        fresh = SupervisionRow("running", "new-turn", 1)
        if not await stores.supervision.compare_and_swap(key, heir, None, fresh):
            problems.append("after the TTL a CAS creating the row at epoch 1 was refused")
        for name, call in {
            "conversations.append": stores.conversations.append_messages(
                key, heir, [Message("again", "user", "afresh")], epoch=1
            ),
            "state.save": stores.state.save(key, heir, {"afresh": True}, epoch=1),
            "pause_tokens.put": stores.pause_tokens.put(
                "again", key, heir, 1, await stores.now() + timedelta(days=1), epoch=1
            ),
        }.items():
            outcome = await _outcome(call)
            if outcome.startswith("raised"):
                problems.append(f"after the TTL a new owner's {name} {outcome}")
        info = await stores.conversations.get_conversation(key, heir)
        if info is None or dict(info.metadata) != {}:
            problems.append(f"after the TTL the new conversation's metadata is {info}")
        stored = await stores.conversations.read_messages(key, heir)
        if [m.id for m in stored] != ["again"]:
            problems.append(f"after the TTL the transcript is {[m.id for m in stored]}")
        if await stores.state.load(key, heir) != {"afresh": True}:
            problems.append("after the TTL the new owner's state did not read back")
        outcome = await _outcome(stores.pause_tokens.claim(TOKEN, key, heir))
        if outcome != "raised NotFoundError":
            problems.append(f"after the TTL the erased pause token {outcome}")
        sibling = self.key("erased-too")
        if await stores.conversations.get_conversation(sibling, heir) is not None:
            problems.append("reusing one lapsed key handed its sibling to the same owner")
        fresh_sibling = SupervisionRow("running", "sibling-turn", 1)
        outcome = await _outcome(
            stores.supervision.compare_and_swap(sibling, "heir-2", None, fresh_sibling), True
        )
        if outcome != "ok":
            problems.append(f"after its TTL another owner's claim of a sibling key {outcome}")
        namesake = self.namesake(key)
        outcome = await _outcome(
            stores.conversations.append_messages(namesake, "heir-3", [Message("n", "user", 1)])
        )
        if outcome.startswith("raised"):
            problems.append(
                f"after its TTL another owner's append to the same session id in another "
                f"tenant {outcome}"
            )
        await stores.conversations.delete(namesake, "heir-3")
        await stores.conversations.delete(key, heir)
        await stores.conversations.delete(sibling, "heir-2")
        await stores.conversations.delete(self.key("source"), OWNER)
        return problems


class PauseTokenExpiry(Lifetime):
    """Claimable while ``now < expires_at``; from ``expires_at`` on ``ExpiredError``
    every time; claimed or abandoned tokens stay ``AlreadyClaimedError``."""

    promise = "lifetimes.pause_token"

    async def start(self, stores: Stores) -> None:
        key = self.key("paused")
        self.alive_until = self.dead_from = await stores.now() + self.lifetime
        for token in ("claimed", "abandoned", "late"):
            await stores.pause_tokens.put(token, key, OWNER, token, self.dead_from)

    async def before(self, stores: Stores) -> list[str]:
        key, problems = self.key("paused"), []
        outcome = await _outcome(stores.pause_tokens.claim("claimed", key, OWNER), "claimed")
        if outcome != "ok":
            problems.append(f"a claim just before expires_at {outcome}")
        await stores.pause_tokens.abandon("abandoned", key, OWNER)
        return problems

    async def after(self, stores: Stores) -> list[str]:
        key, problems = self.key("paused"), []
        for token, expected in (
            ("late", "ExpiredError"),
            ("late", "ExpiredError"),
            ("claimed", "AlreadyClaimedError"),
            ("abandoned", "AlreadyClaimedError"),
        ):
            outcome = await _outcome(stores.pause_tokens.claim(token, key, OWNER))
            if outcome != f"raised {expected}":
                problems.append(f"claiming the {token} token from expires_at on {outcome}")
        return problems


class ConversationExpiry(Lifetime):
    """``Expired()`` sweeps from ``expires_at`` on (``<=``), not before, and follows the
    latest ``expires_at`` given."""

    promise = "lifetimes.expired"

    async def start(self, stores: Stores) -> None:
        conv = stores.conversations
        self.alive_until = self.dead_from = await stores.now() + self.lifetime
        for session in ("temporary", "extended"):
            await conv.append_messages(
                self.key(session), OWNER, [Message("m", "user", 1)], expires_at=self.dead_from
            )
        await conv.append_messages(
            self.key("extended"),
            OWNER,
            [Message("n", "user", 2)],
            expires_at=self.dead_from + 10 * self.lifetime,
        )

    async def _found(self, stores: Stores) -> set[str] | None:
        limit = 100_000
        found = await stores.conversations.find_sweepable(Expired(), limit=limit)
        if len(found) >= limit:
            return None
        return {k.session_id for k in found if k.tenant == self.tenant}

    async def before(self, stores: Stores) -> list[str]:
        problems = []
        if "temporary" in (await self._found(stores) or set()):
            problems.append("find_sweepable(Expired()) found a conversation before expires_at")
        if await stores.conversations.erase_if(self.key("temporary"), Expired()):
            problems.append("erase_if(Expired()) erased a conversation before expires_at")
        return problems

    async def after(self, stores: Stores) -> list[str]:
        conv, problems = stores.conversations, []
        found = await self._found(stores)
        if found is not None and found != {"temporary"}:
            problems.append(f"find_sweepable(Expired()) from expires_at on found {found}")
        if await conv.erase_if(self.key("extended"), Expired()):
            problems.append("erase_if(Expired()) went by an expires_at that was later extended")
        if not await conv.erase_if(self.key("temporary"), Expired()):
            problems.append("erase_if(Expired()) kept a conversation from expires_at on")
        await conv.delete(self.key("extended"), OWNER)
        return problems


class IdleExpiry(Lifetime):
    """``IdleFor(d)`` sweeps once ``updated_at < now - d`` (strictly), ``updated_at``
    being the last write, not the creation."""

    promise = "lifetimes.idle"

    async def start(self, stores: Stores) -> None:
        conv = stores.conversations
        started = await stores.now()
        for session in ("idle", "touched"):
            await conv.append_messages(self.key(session), OWNER, [Message("m", "user", 1)])
        self.alive_until = started + self.lifetime
        self.dead_from = await stores.now() + self.lifetime + TICK

    async def midway(self, stores: Stores) -> None:
        await stores.conversations.append_messages(
            self.key("touched"), OWNER, [Message("n", "user", 2)]
        )

    async def before(self, stores: Stores) -> list[str]:
        if await stores.conversations.erase_if(self.key("idle"), IdleFor(self.lifetime)):
            return ["IdleFor(d) erased a conversation updated exactly d ago, or less"]
        return []

    async def after(self, stores: Stores) -> list[str]:
        conv, rule, problems = stores.conversations, IdleFor(self.lifetime), []
        touched = await conv.get_conversation(self.key("touched"), OWNER)
        assert touched is not None, "the touched conversation is gone"
        limit = 100_000
        found = await conv.find_sweepable(rule, limit=limit)
        mine = {k.session_id for k in found if k.tenant == self.tenant}
        erased_touched = await conv.erase_if(self.key("touched"), rule)
        if touched.updated_at < await stores.now() - self.lifetime:
            problems.append(SLOW)
        elif erased_touched or "touched" in mine:
            problems.append("IdleFor(d) went by created_at: it swept a conversation written since")
        if len(found) < limit and "idle" not in mine:
            problems.append("find_sweepable(IdleFor(d)) missed a conversation idle past d")
        if not await conv.erase_if(self.key("idle"), rule):
            problems.append("erase_if(IdleFor(d)) kept a conversation idle past d")
        await conv.delete(self.key("touched"), OWNER)
        return problems


class PendingAuthorizationExpiry(Lifetime):
    """The core OAuth wrapper over the backend's repository, with the store clock: a
    pending authorization is live while ``now < expires_at`` and gone (cleaned up) from
    ``expires_at`` on; granted tokens outlive it."""

    promise = "lifetimes.oauth_pending"

    def record(self, user: str, *, tokens: bool = False) -> UserIntegration:
        pending = PendingAuthorization(
            state=f"{self.tenant}-{user}",
            auth_url="https://auth.example/authorize",
            code_verifier=f"verifier-{user}",
            token_endpoint="https://auth.example/token",
            redirect_uri="http://localhost:8080/callback",
            expires_at=self.dead_from,
        )
        granted = {"access_token": user} if tokens else None
        return UserIntegration(self.tenant, user, "srv", pending=pending, tokens=granted)

    @staticmethod
    def wrapper(stores: Stores) -> OAuthVault:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return OAuthVault.from_stores(stores, allow_plaintext=True)

    async def start(self, stores: Stores) -> None:
        self.alive_until = self.dead_from = await stores.now() + self.lifetime
        for user in ("bare", "early", "callback", "lookup"):
            await stores.oauth.save_user_integration(self.record(user))
        await stores.oauth.save_user_integration(self.record("granted", tokens=True))

    async def before(self, stores: Stores) -> list[str]:
        oauth, problems = self.wrapper(stores), []
        bare = self.record("bare")
        if await oauth.get_user_integration(self.tenant, "bare", "srv") != bare:
            problems.append("a pending authorization was gone before expires_at")
        assert bare.pending is not None
        if await oauth.find_by_pending_state(bare.pending.state) != bare:
            problems.append("find_by_pending_state missed a pending authorization before expiry")
        early = self.record("early")
        assert early.pending is not None
        outcome = await _outcome(oauth.complete_authorization(early.pending.state), early)
        if outcome != "ok":
            problems.append(f"completing an authorization before expires_at {outcome}")
        return problems

    async def after(self, stores: Stores) -> list[str]:
        oauth, repo, problems = self.wrapper(stores), stores.oauth, []
        if await oauth.get_user_integration(self.tenant, "bare", "srv") is not None:
            problems.append("a pending authorization was still read from expires_at on")
        if await repo.get_user_integration(self.tenant, "bare", "srv") is not None:
            problems.append("an expired pending authorization read was not cleaned up")
        granted = await oauth.get_user_integration(self.tenant, "granted", "srv")
        if granted != replace(self.record("granted", tokens=True), pending=None):
            problems.append(f"a record with tokens and an expired pending read as {granted}")
        lookup = self.record("lookup").pending
        assert lookup is not None
        if await oauth.find_by_pending_state(lookup.state) is not None:
            problems.append("find_by_pending_state found an expired pending authorization")
        callback = self.record("callback").pending
        assert callback is not None
        outcome = await _outcome(oauth.complete_authorization(callback.state))
        if outcome != "raised ExpiredError":
            problems.append(f"completing an authorization from expires_at on {outcome}")
        for user in ("early", "granted"):
            await repo.delete_user_integration(self.tenant, user, "srv")
        return problems


class TurnLiveness(Lifetime):
    """A running row is live while ``now - heartbeat_at <= dead_after`` and dead (taken
    over at the next epoch) after, ``heartbeat_at`` being the latest beat."""

    promise = "lifetimes.liveness"

    def config(self) -> LeaseConfig:
        seconds = self.lifetime.total_seconds()
        return LeaseConfig(dead_after=seconds, heartbeat_interval=seconds / 10)

    async def start(self, stores: Stores) -> None:
        started = await stores.now()
        for session in ("silent", "beating"):
            row = SupervisionRow("running", "turn", 1)
            assert await stores.supervision.compare_and_swap(self.key(session), OWNER, None, row)
        self.alive_until = started + self.lifetime
        self.dead_from = await stores.now() + self.lifetime + TICK

    async def midway(self, stores: Stores) -> None:
        row = SupervisionRow("running", "turn", 1)
        assert await stores.supervision.compare_and_swap(self.key("beating"), OWNER, 1, row)

    async def before(self, stores: Stores) -> list[str]:
        key, problems = self.key("silent"), []
        view = await stores.supervision.read(key, OWNER)
        if liveness(view, self.config().dead_after) != "live":
            problems.append(f"a row that beat dead_after ago or less is not live: {view}")
        try:
            lease = await claim(stores, key, OWNER, "other", lease_config=self.config())
        except BusyError:
            pass
        else:
            problems.append(f"a live turn was taken over ({lease.reason}, epoch {lease.epoch})")
        return problems

    async def after(self, stores: Stores) -> list[str]:
        problems = []
        beating = await stores.supervision.read(self.key("beating"), OWNER)
        if beating.row is None or beating.row.heartbeat_at is None:
            problems.append("the beating turn's row is gone")
        elif beating.now - beating.row.heartbeat_at > self.lifetime:
            problems.append(SLOW)
        elif liveness(beating, self.config().dead_after) != "live":
            problems.append("a turn that beat since it started is judged by its first beat")
        view = await stores.supervision.read(self.key("silent"), OWNER)
        if liveness(view, self.config().dead_after) != "dead":
            problems.append(f"a row silent for longer than dead_after is not dead: {view}")
        try:
            lease = await claim(
                stores, self.key("silent"), OWNER, "other", lease_config=self.config()
            )
        except BusyError:
            problems.append("a turn silent for longer than dead_after could not be taken over")
        else:
            if (lease.reason, lease.epoch) != ("dead", 2):
                problems.append(f"the takeover was ({lease.reason}, epoch {lease.epoch})")
        for session in ("silent", "beating"):
            await stores.conversations.delete(self.key(session), OWNER)
        return problems


LIFETIMES: tuple[type[Lifetime], ...] = (
    TurnLiveness,
    IdleExpiry,
    Tombstone,
    PauseTokenExpiry,
    ConversationExpiry,
    PendingAuthorizationExpiry,
)
"""Lifetimes with a midway write first: after the real wait their checks run soonest."""


def exact(backend: BackendUnderTest) -> bool:
    """Whether lifetimes can be checked at exact instants on this backend."""
    return backend.has(Capability.SETTABLE_CLOCK) and backend.open_with is not None


async def _check_exactly(backend: BackendUnderTest, kind: type[Lifetime]) -> list[str]:
    """Start at a set instant, then check at ``dead_from - TICK`` and ``dead_from``."""
    assert backend.open_with is not None
    clock = ManualClock()
    lifetime = kind(EXACT_LIFETIME)
    async with backend.open_with(tombstone_ttl=EXACT_LIFETIME, clock=clock) as stores:
        await lifetime.start(stores)
        clock.at = EPOCH + EXACT_LIFETIME / 2
        await lifetime.midway(stores)
        clock.at = lifetime.dead_from - TICK
        problems = await lifetime.before(stores)
        clock.at = lifetime.dead_from
        return problems + await lifetime.after(stores)


async def wait_for(stores: Stores, moment: datetime) -> None:
    """Sleep until the store clock reads ``moment`` (a clock that stalls fails)."""
    for _ in range(100):
        now = await stores.now()
        if now >= moment:
            return
        await asyncio.sleep(max((moment - now).total_seconds(), 0.01))
    raise AssertionError(f"the store clock did not reach {moment.isoformat()}")


async def _judged(check: Any) -> list[str]:
    """The problems a check returns, or the exception it raised as one."""
    try:
        found: list[str] = await check
    except Exception as exc:
        return [f"the check raised {type(exc).__name__}: {exc}"]
    return found


async def _check_in_real_time(
    backend: BackendUnderTest, lifetime: timedelta
) -> dict[str, list[str]]:
    """Every lifetime started at once and checked around one shared wait. A lifetime
    whose ``before`` checks ran past ``alive_until`` reports ``SLOW`` and is not judged
    after (its late writes may have landed after the lifetime, by design of the wait)."""
    lifetimes = [kind(lifetime) for kind in LIFETIMES]
    problems: dict[str, list[str]] = {lt.promise: [] for lt in lifetimes}
    if backend.open_with is None:
        problems[Tombstone.promise].append(
            "the contract makes tombstone_ttl a backend option, but this BackendUnderTest "
            "has no open_with to set it"
        )
        lifetimes = [lt for lt in lifetimes if not isinstance(lt, Tombstone)]
        bundle = backend.open()
    else:
        bundle = backend.open_with(tombstone_ttl=lifetime)
    async with bundle as stores:
        for lt in lifetimes:
            await lt.start(stores)
        for lt in lifetimes:
            problems[lt.promise] += await _judged(lt.before(stores))
            if await stores.now() >= lt.alive_until:
                problems[lt.promise].append(SLOW)
        await wait_for(stores, max(lt.dead_from for lt in lifetimes) - lifetime / 2)
        for lt in lifetimes:
            await lt.midway(stores)
        await wait_for(stores, max(lt.dead_from for lt in lifetimes) + MARGIN)
        for lt in lifetimes:
            if SLOW not in problems[lt.promise]:
                problems[lt.promise] += await _judged(lt.after(stores))
    return problems


async def _real_time_verdicts(backend: BackendUnderTest) -> dict[str, list[str]]:
    """The real-time checks, run again with a longer lifetime while any was too slow."""
    for lifetime in REAL_LIFETIMES:
        problems = await _check_in_real_time(backend, lifetime)
        if not any(SLOW in found for found in problems.values()):
            break
    return problems


class LifetimeContract(ContractBase):
    @pytest.fixture(scope="class")
    @classmethod
    def real_time_problems(cls, backend: BackendUnderTest) -> dict[str, list[str]] | None:
        """The real-time checks, run once for every lifetime (None on a settable clock)."""
        if exact(backend):
            return None
        return asyncio.run(_real_time_verdicts(backend))

    def check(
        self,
        backend: BackendUnderTest,
        problems: dict[str, list[str]] | None,
        kind: type[Lifetime],
    ) -> None:
        if problems is None:
            found = asyncio.run(_check_exactly(backend, kind))
        else:
            found = problems[kind.promise]
        assert not found, "; ".join(found)

    @promise("lifetimes.tombstone")
    def test_tombstone_lifetime(
        self, backend: BackendUnderTest, real_time_problems: dict[str, list[str]] | None
    ) -> None:
        self.check(backend, real_time_problems, Tombstone)

    @promise("lifetimes.pause_token")
    def test_pause_token_expiry(
        self, backend: BackendUnderTest, real_time_problems: dict[str, list[str]] | None
    ) -> None:
        self.check(backend, real_time_problems, PauseTokenExpiry)

    @promise("lifetimes.expired")
    def test_temporary_conversation_expiry(
        self, backend: BackendUnderTest, real_time_problems: dict[str, list[str]] | None
    ) -> None:
        self.check(backend, real_time_problems, ConversationExpiry)

    @promise("lifetimes.idle")
    def test_idle_conversation_expiry(
        self, backend: BackendUnderTest, real_time_problems: dict[str, list[str]] | None
    ) -> None:
        self.check(backend, real_time_problems, IdleExpiry)

    @promise("lifetimes.liveness")
    def test_turn_liveness(
        self, backend: BackendUnderTest, real_time_problems: dict[str, list[str]] | None
    ) -> None:
        self.check(backend, real_time_problems, TurnLiveness)

    @promise("lifetimes.oauth_pending")
    def test_pending_authorization_expiry(
        self, backend: BackendUnderTest, real_time_problems: dict[str, list[str]] | None
    ) -> None:
        self.check(backend, real_time_problems, PendingAuthorizationExpiry)
